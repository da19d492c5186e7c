"""The Python-level replacements a simulation makes, where no binding lies beneath.

``torch.cuda`` and ``torch.accelerator`` answer through torch's own Python over the emulated
bindings (:mod:`torchplace.sim.emulation._bindings`). What is left here has no ``torch._C`` binding
under it to emulate, each listed with its reason in docs/sim.md ("What the simulator
replaces at the Python level"): the ``Tensor`` and storage methods whose C++ would see the
backing device (``pin_memory``, ``is_pinned``, ``record_stream``, ``UntypedStorage.data_ptr``
and ``resize_``), ``torch.Generator`` and ``torch.device`` (C types: a generator of a
simulated device, a bare ordinal naming the current accelerator), ``Module.to``'s argument
parser (an int names a CUDA device), the constants of a CUDA build (``torch.version.cuda``,
cuDNN's version and availability, NCCL), ``torch.compile`` (runs eagerly), the entry of the
autograd engine and two ``torch.nn.functional`` functions (so code run from C++ still sees
the simulation), ``torch.save``/``torch.load`` of simulated tensors, and the legacy tensor
types (:mod:`torchplace.sim.emulation._legacy`). Everything is restored when the simulation ends.
"""

from __future__ import annotations

import contextlib
import functools
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch
import torch.nn.functional as F

from torchplace.sim.accounting._state import SimState
from torchplace.sim.emulation._bindings import installed
from torchplace.sim.emulation._bindings_streams import tag_backward_stream
from torchplace.sim.emulation._files import SimFiles
from torchplace.sim.emulation._legacy import legacy_patches
from torchplace.sim.emulation._modes import _DROPOUT, _SDPA, SimFunctionMode
from torchplace.sim.emulation._philox import PhiloxState
from torchplace.sim.emulation._philox import pack as philox_pack
from torchplace.sim.emulation._philox import unpack as philox_unpack
from torchplace.sim.rules import _cuda_rules, _sync_debug

__all__ = [
    "CUDA_VERSION", "SimGenerator", "cublas_allows_tf32", "patched_torch",
]  # fmt: skip

#: ``torch.version.cuda`` inside a simulation: that of the CUDA 13.0 wheel of torch 2.14.1
#: (its torch/version.py).
CUDA_VERSION = "13.0"


def cublas_allows_tf32() -> bool:
    """Whether cuBLAS would run a float32 matmul in TF32 now.

    What the CUDA kernels read: ``float32Precision(CUDA, MATMUL) == TF32``
    (aten/src/ATen/cuda/CublasHandlePool.cpp, CUDABlas.cpp), i.e.
    ``torch.backends.cuda.matmul.fp32_precision == "tf32"``. Not the legacy
    ``allow_tf32`` getter (``_get_cublas_allow_tf32``), which raises once a script has set
    the legacy and the new flag to different values (aten/src/ATen/Context.cpp
    ``allowTF32CuBLAS``), though matmuls still run then.
    """
    getter = getattr(torch._C, "_get_fp32_precision_getter", None)
    if getter is None:  # torch before the fp32_precision API
        return bool(torch._C._get_cublas_allow_tf32())
    return bool(getter("cuda", "matmul") == "tf32")


T = TypeVar("T")


class _GeneratorMeta(type(torch._C.Generator)):  # type: ignore[misc]
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, torch._C.Generator)


class SimGenerator(torch._C.Generator, metaclass=_GeneratorMeta):
    """``torch.Generator(device="cuda")``: a CPU generator that reports a simulated device.

    Its device keeps the index it was given: ``Generator("cuda").device`` is ``cuda``, not
    ``cuda:0`` (torch/csrc/Generator.cpp makes ``CUDAGeneratorImpl(device.index())``, whose
    device index stays -1; pytorch/pytorch#58545). It draws on the current device's.
    """

    _label: int | None = None
    _indexed = True

    def __new__(cls, device: Any = "cpu") -> SimGenerator:
        return super().__new__(cls, device="cpu")  # type: ignore[call-arg]

    def __init__(self, device: Any = "cpu") -> None:
        self._label = _resolve_generator_device(device)
        self._indexed = isinstance(device, int) or torch.device(device).index is not None

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        if self._label is None:
            return torch.device("cpu")
        return torch.device("cuda", self._label) if self._indexed else torch.device("cuda")

    # A simulated CUDA generator's state is CUDA's (seed, Philox offset): sim/emulation/_philox.py.
    _philox: PhiloxState | None = None

    @property
    def philox(self) -> PhiloxState:
        if self._philox is None:
            self._philox = PhiloxState(_DEFAULT_SEED)
        return self._philox

    def draw(self, run: Callable[[], T]) -> T:
        """A random operation on this generator (``run`` draws from it)."""
        return run() if self._label is None else self.philox.draw(self, run)

    _capture_seed: int | None = None  # the seed when a capture began, while it runs

    def manual_seed(self, seed: Any) -> SimGenerator:
        # CUDAGeneratorImpl::set_current_seed (aten/src/ATen/cuda/CUDAGeneratorImpl.cpp):
        # during a stream capture only the seed the generator already has is accepted
        # (a no-op); set while this generator's device captures a CUDA graph.
        captured = self._capture_seed
        if captured is not None:
            if int(seed) & 0xFFFF_FFFF_FFFF_FFFF != captured:
                raise RuntimeError(
                    "CUDAGeneratorImpl::set_current_seed can be called during stream capture "
                    "only if new seed is the same as the original seed."
                )
            return self
        super().manual_seed(seed)  # torch's own checks of the seed
        if self._label is not None:
            self._philox = PhiloxState(super().initial_seed())
        return self

    def clone_state(self) -> SimGenerator:
        """A new generator with this one's state (CUDAGeneratorImpl::clone_state)."""
        out = SimGenerator()
        out._label, out._indexed = self._label, self._indexed
        out.set_state(self.get_state())
        return out

    def graphsafe_get_state(self) -> Any:
        raise _graphsafe_refused()

    def graphsafe_set_state(self, state: Any) -> Any:
        raise _graphsafe_refused()

    def seed(self) -> int:
        seed = super().seed()
        if self._label is not None:
            self._philox = PhiloxState(seed)
        return seed

    def initial_seed(self) -> int:
        return super().initial_seed() if self._label is None else self.philox.seed

    def get_state(self) -> torch.Tensor:
        if self._label is None:
            return super().get_state()
        return philox_pack(self.philox.seed, self.philox.offset)

    def set_state(self, new_state: torch.Tensor) -> SimGenerator:
        if self._label is None:
            super().set_state(new_state)
        else:
            self.philox.seed, self.philox.offset = philox_unpack(new_state)
        return self

    def get_offset(self) -> int:
        return super().get_offset() if self._label is None else self.philox.offset

    def set_offset(self, offset: int) -> SimGenerator:
        if self._label is None:
            super().set_offset(offset)
        elif offset % 4:
            raise RuntimeError("offset must be a multiple of 4")
        else:
            self.philox.offset = offset
        return self


def _graphsafe_refused() -> RuntimeError:
    return RuntimeError(
        "not simulated: graph-safe generator states (graphsafe_get_state, "
        "graphsafe_set_state): a simulated GPU's generator is the host's, whose state "
        "cannot be shared between generators; use get_state/set_state"
    )


_resolve_generator_device: Callable[[Any], int | None] = lambda device: None  # noqa: E731


def generator_label(gen: Any) -> int | None:
    """The simulated device of a generator (None for a host generator)."""
    return getattr(gen, "_label", None)


class _NVTX:
    """NVTX as a script sees it when no profiler (Nsight Systems) is attached: push and pop
    return NVTX_NO_PUSH_POP_TRACKING (-2) and range_start returns 0 (nvtx3's
    nvToolsExt.h implementation: the calls with no tool's callback installed)."""

    def rangePushA(self, msg: str) -> int:
        return -2

    def rangePop(self) -> int:
        return -2

    def rangeStartA(self, msg: str) -> int:
        return 0

    def rangeEnd(self, range_id: int) -> None: ...
    def markA(self, msg: str) -> None: ...
    def deviceRangeStart(self, msg: str, stream: Any) -> int:
        return self.rangeStartA(msg)

    def deviceRangeEnd(self, handle: Any, stream: Any) -> None: ...


def _wrap_dim(dim: int, ndim: int) -> int:
    """c10's maybe_wrap_dim (a 0-d tensor counts as 1-d), with its IndexError and message."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n


def _comm_api() -> dict[str, Any]:
    """``torch._C``'s ``_broadcast*``, ``_scatter*`` and ``_gather*`` (torch/csrc/cuda/comm.cpp,
    bound in python_comm.cpp), which ``torch.cuda.comm`` and ``nn.DataParallel`` call: the
    same argument checks and messages, the same copies between simulated devices (so their
    memory and device-to-device traffic are accounted), views where comm.cpp returns views."""
    from torch._prims_common import suggest_memory_format
    from torch._utils import (
        _flatten_dense_tensors,
        _reorder_tensors_as,
        _take_tensors,
        _unflatten_dense_tensors,
    )

    def check(cond: bool, *message: object) -> None:  # TORCH_CHECK: a RuntimeError
        if not cond:
            raise RuntimeError("".join(str(m) for m in message))

    def sizes(t: torch.Tensor) -> str:  # an IntArrayRef as c10 prints it: [2, 5]
        return str(list(t.shape))

    def check_cuda_outputs(out: list[torch.Tensor]) -> None:
        for i, o in enumerate(out):
            check(
                o.is_cuda,
                "Expected all output tensors to be CUDA tensors, but output tensor at index ",
                i,
                " has device '",
                o.device,
                "'",
            )

    def broadcast_out_impl(tensor: torch.Tensor, out: list[torch.Tensor]) -> list[torch.Tensor]:
        for o in out:  # no NCCL in a simulation: comm.cpp's copy loop
            o.copy_(tensor, non_blocking=True)
        return out

    def broadcast_out(tensor: torch.Tensor, out: list[torch.Tensor]) -> list[torch.Tensor]:
        out = list(out)
        check_cuda_outputs(out)
        for i, o in enumerate(out):
            check(
                o.shape == tensor.shape,
                "Expected all output tensors to have same shape as the source tensor ",
                sizes(tensor),
                ", but output tensor at index ",
                i,
                " has shape ",
                sizes(o),
            )
        return broadcast_out_impl(tensor, out)

    def broadcast(tensor: torch.Tensor, devices: list[int]) -> list[torch.Tensor]:
        # comm.cpp broadcast: an empty tensor on each other device, filled by one copy; the
        # source itself where a device is its own
        here = tensor.get_device()
        for d in devices:
            check(d >= 0, "Expected non-negative device index, but got ", d)
        copies = broadcast_out_impl(
            tensor,
            [
                torch.empty(tensor.shape, dtype=tensor.dtype, device=torch.device("cuda", d))
                for d in devices
                if d != here
            ],
        )
        it = iter(copies)
        return [tensor if d == here else next(it) for d in devices]

    def broadcast_coalesced(
        tensors: list[torch.Tensor], devices: list[int], buffer_size: int
    ) -> list[list[torch.Tensor]]:
        # comm.cpp broadcast_coalesced: the tensors of each buffer_size chunk of one type are
        # flattened into one buffer, broadcast, and unflattened into views of it on each other
        # device; each view gets its own version counter (NOTE [ Version Counter in
        # comm.*_coalesced ]: ``.data``), devices[0]'s outputs are the inputs themselves
        check(
            all(t.get_device() == devices[0] for t in tensors),
            "All tensors must be on devices[0]: ",
            devices[0],
        )
        outputs: list[list[torch.Tensor]] = [list(tensors)] + [[] for _ in devices[1:]]
        types_seen: set[torch.dtype] = set()
        with torch.cuda.device(devices[0]):
            for chunk in _take_tensors(tensors, buffer_size):
                types_seen.add(chunk[0].dtype)
                results = broadcast(_flatten_dense_tensors(chunk), devices)
                for i in range(1, len(devices)):
                    with torch.cuda.device(devices[i]):
                        flat = _unflatten_dense_tensors(results[i], chunk)
                        outputs[i].extend(t.data for t in flat)
        if len(types_seen) > 1:  # take_tensors grouped them by type
            outputs[1:] = [list(_reorder_tensors_as(o, tensors)) for o in outputs[1:]]
        return outputs

    def stream_of(streams: Any, i: int, device: int) -> Any:
        """comm.cpp's check that the stream given for chunk i is on its device."""
        stream = streams[i] if streams is not None and i < len(streams) else None
        if stream is not None:
            check(
                stream.device_index == device,
                "Expected the device associated with the stream at index ",
                i,
                " (was ",
                stream.device_index,
                ") to match the device supplied at that index (expected ",
                device,
                ")",
            )
        return torch.cuda.stream(stream)

    def scatter(
        tensor: torch.Tensor,
        devices: list[int],
        chunk_sizes: list[int] | None = None,
        dim: int = 0,
        streams: Any = None,
    ) -> list[torch.Tensor]:
        check(len(devices) > 0, "Expected at least one device to scatter to")
        if chunk_sizes is not None:
            check(
                len(chunk_sizes) == len(devices),
                "Expected devices and chunk_sizes to be of same length, but got len(devices) = ",
                len(devices),
                " and len(chunk_sizes) = ",
                len(chunk_sizes),
            )
        chunks = list(
            tensor.split_with_sizes(list(chunk_sizes), dim)
            if chunk_sizes is not None
            else tensor.chunk(len(devices), dim)
        )
        here = tensor.get_device()
        for i, chunk in enumerate(chunks):
            d = devices[i]
            if d != here:  # a chunk on its own device stays a view of the source
                with stream_of(streams, i, d):
                    check(d >= 0, "Expected non-negative device index, but got ", d)
                    chunks[i] = chunk.to(
                        torch.device("cuda", d), non_blocking=True
                    )  # memory format kept
        return chunks

    def scatter_out(
        tensor: torch.Tensor, out: list[torch.Tensor], dim: int, streams: Any = None
    ) -> list[torch.Tensor]:
        out = list(out)
        check(len(out) > 0, "Expected at least one output tensor to scatter to")
        dim = _wrap_dim(dim, tensor.dim())
        check_cuda_outputs(out)
        total = 0
        for i, o in enumerate(out):
            same_ndim = o.dim() == tensor.dim()
            if same_ndim:
                total += o.shape[dim]
            check(
                same_ndim
                and o.shape[:dim] + o.shape[dim + 1 :]
                == tensor.shape[:dim] + tensor.shape[dim + 1 :],
                "Output tensor at index ",
                i,
                " has incorrect shape: ",
                sizes(o),
                ". Expected same shape except for scatter dim ",
                dim,
                " as the source tensor: ",
                sizes(tensor),
            )
        check(
            total == tensor.shape[dim],
            "Total size for output tensors along scatter dim ",
            dim,
            " does not match the source tensor size at dim ",
            dim,
            ". Expected ",
            tensor.shape[dim],
            ", but got total size ",
            total,
        )
        chunks = tensor.split_with_sizes([o.shape[dim] for o in out], dim)
        for i, (o, chunk) in enumerate(zip(out, chunks, strict=True)):
            with stream_of(streams, i, o.get_device()):
                o.copy_(chunk, non_blocking=True)
        return out

    def check_gather_inputs(
        tensors: list[torch.Tensor], dim: int, quote: str
    ) -> tuple[int, list[int]]:
        check(len(tensors) > 0, "Expected at least one tensor to gather from")
        first = tensors[0]
        dim = _wrap_dim(dim, first.dim())
        expected = list(first.shape)
        for i, t in enumerate(tensors):
            check(
                t.is_cuda,
                "Expected all input tensors to be CUDA tensors, but tensor at index ",
                i,
                f" has device {quote}{t.device}{quote}",
            )
            check(
                t.dim() == len(expected),
                # "has" without a space before it, as comm.cpp writes it
                "Expected all input tensors to have the same number of dimensions, but ",
                "tensor at index ",
                i,
                "has ",
                t.dim(),
                " dimensions, (expected ",
                len(expected),
                ")",
            )
            expected[dim] = t.shape[dim]
            check(
                list(t.shape) == expected,
                "Input tensor at index ",
                i,
                " has invalid shape ",
                sizes(t),
                ", but expected ",
                expected,
            )
        expected[dim] = sum(t.shape[dim] for t in tensors)
        return dim, expected

    def gather_out_impl(tensors: list[torch.Tensor], out: torch.Tensor, dim: int) -> torch.Tensor:
        chunks = out.split_with_sizes([t.shape[dim] for t in tensors], dim)
        for chunk, t in zip(chunks, tensors, strict=True):
            chunk.copy_(t, non_blocking=out.is_cuda)
        return out

    def gather(tensors: list[torch.Tensor], dim: int, destination: int | None) -> torch.Tensor:
        tensors = list(tensors)
        dim, expected = check_gather_inputs(tensors, dim, quote="")
        # the first input's suggested memory format, unless an input suggests another
        formats = {suggest_memory_format(t) for t in tensors}
        memory_format = formats.pop() if len(formats) == 1 else torch.contiguous_format
        if destination == -1:
            device = torch.device("cpu")
        else:  # None: the current device (c10's Device(kCUDA, -1))
            device = torch.device(
                "cuda", torch.cuda.current_device() if destination is None else destination
            )
        out = torch.empty(
            expected, dtype=tensors[0].dtype, device=device, memory_format=memory_format
        )
        return gather_out_impl(tensors, out, dim)

    def gather_out(tensors: list[torch.Tensor], out: torch.Tensor, dim: int) -> torch.Tensor:
        tensors = list(tensors)
        dim, expected = check_gather_inputs(tensors, dim, quote="'")
        check(
            list(out.shape) == expected,
            "Expected out tensor to have shape ",
            expected,
            ", but got ",
            sizes(out),
        )
        return gather_out_impl(tensors, out, dim)

    return {
        "_broadcast": broadcast,
        "_broadcast_out": broadcast_out,
        "_broadcast_coalesced": broadcast_coalesced,
        "_scatter": scatter,
        "_scatter_out": scatter_out,
        "_gather": gather,
        "_gather_out": gather_out,
    }


def _compile(model: Any = None, **kwargs: Any) -> Any:
    warnings.warn(
        "torchplace sim: torch.compile is not simulated; the model runs eagerly (the memory "
        "and time of compiled kernels differ, usually lower).",
        stacklevel=2,
    )
    if model is None:
        return lambda m: m
    return model


def _group_by_device(state: SimState) -> Callable[..., Any]:
    """``torch._C._group_tensors_by_device_and_dtype`` keyed by the simulated device, as the
    foreach and fused optimizers, ``clip_grad_norm_`` and ``GradScaler`` see it on CUDA."""
    real = torch._C._group_tensors_by_device_and_dtype

    def group(tensorlistlist: list[list[Any]], with_indices: bool = False) -> dict[Any, Any]:
        first = tensorlistlist[0]
        labels = [None if t is None else state.label(t) for t in first]
        if all(label is None for label in labels):
            return real(tensorlistlist, with_indices)
        out: dict[Any, Any] = {}
        for i, (t, label) in enumerate(zip(first, labels, strict=True)):
            key = (t.device if label is None else _REAL_DEVICE("cuda", label), t.dtype)
            lists, indices = out.setdefault(key, ([[] for _ in tensorlistlist], []))
            for lst, src in zip(lists, tensorlistlist, strict=True):
                if src:
                    lst.append(src[i])
            indices.append(i)
        return {k: (lists, indices if with_indices else []) for k, (lists, indices) in out.items()}

    return group


_REAL_DEVICE = torch.device


class _DeviceType(type):
    """``torch.device`` as a CUDA machine has it: a bare ordinal, ``torch.device(0)``, names
    a device of the current accelerator (torch/csrc/Device.cpp THPDevice_pynew; docs, Tensor
    Attributes: "treated as the current accelerator type"), which a CPU build has none of.
    Instances and ``isinstance`` stay torch's own."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _REAL_DEVICE)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _REAL_DEVICE)

    def __call__(cls, *args: Any, **kwargs: Any) -> torch.device:
        if len(args) == 1 and not kwargs and type(args[0]) is int:
            return _REAL_DEVICE("cuda", args[0])
        return _REAL_DEVICE(*args, **kwargs)


class _Device(metaclass=_DeviceType):
    pass


@contextlib.contextmanager
def patched_torch(
    state: SimState, fmode: SimFunctionMode, *, write_files: bool = False
) -> Iterator[None]:
    """Replace the CUDA-facing parts of torch for the duration of a simulation."""
    global _resolve_generator_device
    for d in state.devices:
        d.generator = SimGenerator()
        d.generator._label, d.generator._indexed = d.index, True
        d.generator.manual_seed(_DEFAULT_SEED)
    patches: list[tuple[Any, str, Any]] = [(torch._C, k, v) for k, v in _comm_api().items()]
    patches += [(torch._C, k, v) for k, v in _sync_debug.bindings().items()]
    patches += [
        # the sync debug mode (torch.cuda.set_sync_debug_mode): sim/rules/_sync_debug.py
    ]
    real_is_pinned = torch.Tensor.is_pinned

    # Tensor.pin_memory / is_pinned ask the CUDA host allocator of the tensor's real
    # device (at::native::_pin_memory, is_pinned): a simulation keeps its own record
    # (torchplace.sim.emulation._bindings.PinnedHostMemory, the host caching allocator's statistics)
    def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
        if state.label(self) is not None:
            raise RuntimeError(f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")
        if self.untyped_storage() in state.pinned:
            return self
        if self.is_meta:
            return self
        return state.pinned.pin(self)  # from the host caching allocator (_bindings_host)

    def is_pinned(self: torch.Tensor, device: Any = None) -> bool:
        if self.is_meta or state.label(self) is not None:
            return False
        return self.untyped_storage() in state.pinned or bool(real_is_pinned(self))

    def record_stream(self: torch.Tensor, stream: Any) -> None:
        # c10 CUDACachingAllocator.cpp recordStream: the block is not reused before the
        # work enqueued on `stream` by the tensor's free is done (SimState.record_use)
        if state.label(self) is not None:
            state.record_use(self.untyped_storage(), int(stream.stream_id))

    def storage_data_ptr(self: Any) -> int:
        address = state.address(self) if state.storage_label(self) is not None else None
        return address if address is not None else real_storage_data_ptr(self)

    real_storage_data_ptr = torch.UntypedStorage.data_ptr
    real_storage_is_shared = torch.UntypedStorage.is_shared

    def storage_is_shared(self: Any) -> bool:
        # torch/csrc/StorageMethods.cpp THPStorage_isShared: always True for CUDA storages
        return state.storage_label(self) is not None or bool(real_storage_is_shared(self))

    real_storage_resize = torch.UntypedStorage.resize_

    def storage_resize(self: Any, size: Any) -> Any:
        label = state.storage_label(self)
        out = real_storage_resize(self, size)
        if label is not None:
            state.resize_storage(self, label, int(size))
        return out

    real_parse_to = torch._C._nn._parse_to

    def parse_to(*args: Any, **kwargs: Any) -> Any:
        # Module.to(0) / model.to(rank): an int names a CUDA device, as on a GPU machine
        if args and isinstance(args[0], int) and not isinstance(args[0], bool):
            args = (torch.device("cuda", args[0]), *args[1:])
        if not args and "device" in kwargs:  # Module.to(device=0): as the positional form
            device = kwargs.pop("device")
            args = (torch.device("cuda", device) if type(device) is int else device,)
        return real_parse_to(*args, **kwargs)

    def checkpoint_metadata(x: torch.Tensor) -> dict[str, Any]:
        # torch.utils.checkpoint compares what forward saved with what backward recomputed;
        # forward's pack hooks run where torch sees the backing device, the recompute where
        # the simulated one is visible: report the simulated device in both.
        label = state.label(x)
        with torch._C.DisableTorchFunction():
            device = x.device if label is None else torch.device("cuda", label)
        return {"shape": x.shape, "dtype": x.dtype, "device": device}

    # torchplace's own device discovery (torchplace.devices(), device("auto"), Runner,
    # `torchplace info`) sees the simulated GPUs: a driver that loads, and no NVML (the
    # facts come from torch.cuda, which answers as the simulated GPUs).
    from torchplace._devices import probe

    def no_nvml() -> Any:
        raise RuntimeError("simulated GPUs have no NVML")

    patches += [(probe, "cuda_driver_loads", lambda: True), (probe, "nvml_open", no_nvml)]

    # torch.cuda._utils loads NVRTC and the CUDA driver with ctypes (torch.cuda._compile_kernel,
    # TunableOp's offline tuning): no torch._C binding lies beneath, so the loaders refuse
    def no_nvrtc() -> Any:
        raise RuntimeError(
            "not simulated: compiling CUDA C++ at run time (NVRTC, torch.cuda._compile_kernel): "
            "a simulated GPU runs no kernels of its own; write the operation with torch "
            "operators instead"
        )

    def no_driver() -> Any:
        raise RuntimeError(
            "not simulated: calling the CUDA driver directly (libcuda through ctypes): a "
            "simulated GPU has no driver; use torch.cuda's functions"
        )

    # A custom autograd.Function's backward runs on its forward's stream too: its node is
    # made in C++ by Function.apply, past the function mode (see tag_backward_stream)
    function_apply = vars(torch.autograd.function.Function)["apply"]  # a classmethod (in C: 2.14)

    def apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
        out = function_apply.__get__(None, cls)(*args, **kwargs)
        if state.side_streams and torch.is_grad_enabled():
            tag_backward_stream(out, state.current)
        return out

    patches.append((torch.autograd.function.Function, "apply", classmethod(apply)))

    # torch.cuda.jiterator's functions note is_available() when they are made
    # (torch/cuda/jiterator.py: _JittedFunction.__init__), and __call__ raises "Jiterator is
    # only supported on CUDA and ROCm GPUs" on that note: a function made before the
    # simulation began (OpInfo's jiterator operators, made at import) would raise it where a
    # GPU machine reaches the binding, which refuses plainly (not simulated). The note is
    # read when called instead (what a GPU machine answers at either time).
    import torch.cuda.jiterator as jiterator

    jitted = getattr(jiterator, "_JittedFunction", None)
    if isinstance(jitted, type):
        patches.append((jitted, "is_cuda_available", _available_when_called()))
    import torch.cuda._utils as utils

    if hasattr(utils, "_get_gpu_rtc_library"):
        patches += [(utils, "_get_gpu_rtc_library", no_nvrtc)]
        patches += [(utils, "_get_gpu_runtime_library", no_driver)]
    files = SimFiles(state, fmode.resolve, in_place=write_files)
    for module in (torch, torch.serialization):
        patches.append((module, "save", functools.partial(files.save, torch.serialization.save)))
        patches.append((module, "load", functools.partial(files.load, torch.serialization.load)))
    nvtx = getattr(torch.cuda, "nvtx", None)
    patches += legacy_patches(state)
    patches += [
        (torch.Tensor, "pin_memory", pin_memory),
        (torch.Tensor, "is_pinned", is_pinned),
        (torch.Tensor, "record_stream", record_stream),
        (torch.UntypedStorage, "data_ptr", storage_data_ptr),
        (torch.UntypedStorage, "resize_", storage_resize),
        (torch.UntypedStorage, "is_shared", storage_is_shared),
        (torch._C._nn, "_parse_to", parse_to),
        (torch._C, "_group_tensors_by_device_and_dtype", _group_by_device(state)),
        (torch, "compile", _compile),
        (
            torch.autograd,
            "_engine_run_backward",
            fmode.engine(torch.autograd._engine_run_backward),  # type: ignore[attr-defined]
        ),
        (torch, "Generator", SimGenerator),
        (torch, "device", _Device),
        # nn.LSTM/GRU/RNN on CUDA pack their weights into one cuDNN buffer
        # (torch._cudnn_rnn_flatten_weight, which has no kernel for the backing tensors: a CUDA
        # build without a driver raised NotImplementedError). The flat buffer replaces the
        # separate weights, so the bytes are the same (not modelled: both live while it is
        # built); RNNs run the native kernels, as the CPU build already did.
        (torch.nn.RNNBase, "flatten_parameters", lambda self: None),
        # reached from inside torch.nn.functional's own functions (multi-head attention)
        (F, "scaled_dot_product_attention", fmode.reentrant(_SDPA)),
        (F, "dropout", fmode.reentrant(_DROPOUT)),
        (torch.version, "cuda", CUDA_VERSION),
        # DataParallel's reduce and broadcast take NCCL where torch was built with it (a
        # CUDA build): simulated GPUs go the copy-and-add way, with the same transfers
        (torch.cuda.nccl, "is_available", lambda tensors: False),
    ]
    if isinstance(nvtx, types.ModuleType):
        patches.append((nvtx, "_nvtx", _NVTX()))
    import torch.utils.checkpoint as checkpoint

    checks = getattr(checkpoint, "_allowed_determinism_checks_to_fns", None)
    saved_check = checks.get("default") if isinstance(checks, dict) else None
    # one function object per name: torch._dynamo, when a script first imports it inside the
    # simulation, tabulates these by identity and refuses one object under two names
    patches = [
        (obj, name, _fresh(value) if _shared(value) else value) for obj, name, value in patches
    ]
    # what each object itself holds (a class's inherited attribute is deleted, not copied in)
    saved = [(obj, name, vars(obj).get(name, _MISSING)) for obj, name, _ in patches]
    swap = torch.__future__.get_swap_module_params_on_conversion()
    resolve_saved = _resolve_generator_device
    try:
        for obj, name, value in patches:
            setattr(obj, name, value)
        if saved_check is not None:
            checks["default"] = checkpoint_metadata  # type: ignore[index]
        _resolve_generator_device = fmode.resolve
        # Parameters keep their identity when a module moves to a simulated device, as they
        # do on CUDA (meta and CPU tensors are not shallow-copy compatible, so swap them).
        torch.__future__.set_swap_module_params_on_conversion(True)
        with files.registered(), _cuda_rules.installed(state), installed(state, fmode):
            yield
    finally:
        _resolve_generator_device = resolve_saved
        if saved_check is not None:
            checks["default"] = saved_check  # type: ignore[index]
        torch.__future__.set_swap_module_params_on_conversion(swap)
        for obj, name, value in reversed(saved):
            if value is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, value)


def _available_when_called() -> property:
    """``_JittedFunction.is_cuda_available`` as ``torch.cuda.is_available()`` now; what
    ``__init__`` notes is kept in the instance (a function made in the simulation is one
    made where CUDA is available)."""

    def note(self: Any, value: bool) -> None:
        vars(self)["is_cuda_available"] = value

    return property(lambda self: torch.cuda.is_available(), note)


def _shared(value: Any) -> bool:
    """A function that may be installed under two names (not one made for its place)."""
    return isinstance(value, types.FunctionType) and not getattr(value, "_torchplace_unique", False)


def _fresh(f: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return f(*args, **kwargs)

    call.__name__ = call.__qualname__ = f.__name__
    return call


_MISSING = object()
# c10/core/GeneratorImpl.h default_rng_seed_val: every generator's seed until one is set
_DEFAULT_SEED = 67280421310721
