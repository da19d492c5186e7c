"""``torch.cuda``, ``torch.accelerator`` and friends as the simulated GPUs would answer them.

Where PyTorch's own Python code can do the work, the simulator answers at the boundary it
calls — the ``torch._C._cuda_*`` and ``torch._C._accelerator_*`` bindings (device count and
index, memory statistics and snapshots, the memory fraction, streams, synchronisation, the
architecture list) — so ``torch.cuda.memory_summary()``, ``torch.cuda.device(i)``,
``torch.cuda.stream(s)``, ``torch.accelerator.memory_allocated()`` and the rest run
PyTorch's own code. Functions that need a driver before they reach a binding
(``is_available``, ``get_device_properties``, ``mem_get_info``, ...) are replaced.
Everything is restored when the simulation ends.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch
import torch.nn.functional as F

from torchplace.sim import _cuda_rules, _sync_debug
from torchplace.sim._files import SimFiles
from torchplace.sim._legacy import legacy_patches
from torchplace.sim._modes import _DROPOUT, _SDPA, SimFunctionMode, invalid_ordinal
from torchplace.sim._philox import PhiloxState
from torchplace.sim._philox import pack as philox_pack
from torchplace.sim._philox import unpack as philox_unpack
from torchplace.sim._state import SimState, is_user_file, sim_uuid

__all__ = ["CUDA_VERSION", "CUDNN_VERSION", "SimDeviceProperties", "SimGenerator", "patched_torch"]

#: ``torch.version.cuda`` and ``torch.backends.cudnn.version()`` inside a simulation: those of
#: the CUDA 13.0 wheel of torch 2.14.1 (its torch/version.py, and cudnn_version.h of the
#: nvidia-cudnn package it installs, which torch.backends.cudnn.version() reports).
CUDA_VERSION = "13.0"
CUDNN_VERSION = 92400
# sm_ architectures the CUDA 13.0 wheels are built for (torch.cuda.get_arch_list()).
_ARCH_FLAGS = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"


class SimDeviceProperties:
    """What ``torch.cuda.get_device_properties`` returns for a simulated GPU."""

    def __init__(self, state: SimState, index: int) -> None:
        d = state.devices[index]
        spec = d.spec
        self.name = spec.torch_name
        self.major, self.minor = spec.compute_capability or (9, 4)
        self.total_memory = d.capacity
        self.multi_processor_count = spec.multiprocessor_count
        self.is_integrated = 0
        self.is_multi_gpu_board = 0
        for key, value in spec.arch_properties().items():  # per architecture, sourced
            setattr(self, key, value)
        self.L2_cache_size = spec.l2_cache_bytes or 0
        self.memory_bus_width = spec.memory_bus_width_bits or 0
        self.memory_clock_rate = spec.memory_clock_khz or 0
        self.gcnArchName = spec.gcn_arch or self.name
        self.uuid = sim_uuid(index)
        self.pci_bus_id = index + 1
        self.pci_device_id = 0
        self.pci_domain_id = 0

    def __repr__(self) -> str:
        return (
            f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // 1024**2}MB, "
            f"multi_processor_count={self.multi_processor_count}, uuid={self.uuid}, "
            f"pci_bus_id={self.pci_bus_id}, pci_device_id={self.pci_device_id}, "
            f"pci_domain_id={self.pci_domain_id}, L2_cache_size="
            f"{self.L2_cache_size // 1024**2}MB) [simulated]"
        )


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

    # A simulated CUDA generator's state is CUDA's (seed, Philox offset): sim/_philox.py.
    _philox: PhiloxState | None = None

    @property
    def philox(self) -> PhiloxState:
        if self._philox is None:
            self._philox = PhiloxState(_DEFAULT_SEED)
        return self._philox

    def draw(self, run: Callable[[], T]) -> T:
        """A random operation on this generator (``run`` draws from it)."""
        return run() if self._label is None else self.philox.draw(self, run)

    def manual_seed(self, seed: Any) -> SimGenerator:
        super().manual_seed(seed)  # torch's own checks of the seed
        if self._label is not None:
            self._philox = PhiloxState(super().initial_seed())
        return self

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


def _nested(flat: dict[str, int]) -> dict[str, Any]:
    """``memory_stats()`` keys ("allocated_bytes.all.current") as the nested dict
    ``torch._C._cuda_memoryStats`` returns."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def _api(state: SimState, fmode: SimFunctionMode) -> tuple[dict[str, Any], dict[str, Any]]:
    """The replacements: (torch.cuda attributes, torch._C attributes)."""

    def count() -> int:
        state.init_cuda()
        return len(state.devices)

    streams = threading.local()  # per thread: device -> current stream id
    next_stream = [1]

    def index(device: Any = None) -> int:
        state.init_cuda()
        n = len(state.devices)
        if n == 0:
            raise RuntimeError("No CUDA GPUs are available")
        if device is None:
            return state.current
        if isinstance(device, int):
            i = device
        else:
            dev = torch.device(device)
            if dev.type != "cuda":
                raise ValueError(f"Expected a cuda device, but got: {dev}")
            i = state.current if dev.index is None else dev.index
        if not -1 <= i < n:
            raise invalid_ordinal(i, n)
        return state.current if i == -1 else i

    def lazy_init() -> None:
        state.init_cuda()
        state.initialized = True

    def set_device(device: Any) -> None:
        i = index(device)
        if i >= 0:
            state.current = i
            state.initialized = True

    def exchange(device: int) -> int:
        prev = state.current
        if device >= 0:
            set_device(device)
        return prev

    def read_by_script() -> None:
        # the user's code asked (torch's own callers, such as autocast's bf16 check, are
        # not counted): its path may depend on the GPU
        caller = sys._getframe(2).f_code.co_filename
        if is_user_file(caller):
            state.decisions.add("the GPU's properties (the script read them)")

    def properties(device: Any = None) -> SimDeviceProperties:
        read_by_script()
        return SimDeviceProperties(state, index(device))

    def device_name(device: Any = None) -> str:
        read_by_script()
        return str(state.devices[index(device)].spec.torch_name)

    def mem_get_info(device: Any = None) -> tuple[int, int]:
        state.sync()
        d = state.devices[index(device)]
        return d.allocator.device_free_bytes, d.capacity

    def memory_stats(device: int) -> dict[str, Any]:
        state.sync()
        return _nested(state.devices[index(device)].allocator.stats())

    def snapshot(*args: Any) -> dict[str, Any]:
        from torchplace.sim.snapshot import snapshot as build

        return build(state, history=state.history)

    def record_history(enabled: Any = "all", *args: Any, **kwargs: Any) -> None:
        # torch.cuda.memory._record_memory_history: events from now on go in the snapshot's
        # device traces (the simulator records them anyway; this says which to show)
        clear = bool(args[3]) if len(args) > 3 else bool(kwargs.get("clear_history"))
        if clear:
            state.history.clear()
        if enabled is None:
            if state.history and state.history[-1][1] is None:
                state.history[-1] = (state.history[-1][0], state.trace.seq)
        elif not state.history or state.history[-1][1] is not None:
            state.history.append((state.trace.seq + 1, None))

    def synchronize(*args: Any) -> None:
        state.record_sync("synchronize")

    def current(device: int) -> tuple[int, int, int]:
        i = index(device)
        return getattr(streams, "ids", {}).get(i, 0), i, 1  # 1 = DeviceType::CUDA

    def set_stream(stream_id: int = 0, device_index: int = 0, device_type: int = 1) -> None:
        if not hasattr(streams, "ids"):
            streams.ids = {}
        streams.ids[device_index] = stream_id

    def fraction(value: float, device: Any = None) -> None:
        d = state.devices[index(device)]
        d.allocator.set_memory_fraction(value)

    def reset_peak(device: Any = None) -> None:
        state.sync()
        state.devices[index(device)].allocator.reset_peak_stats()

    def seed_all(seed: int) -> None:
        for d in state.devices:
            d.generator.manual_seed(seed)

    class Event:
        """``torch.cuda.Event``: records the cost model's clock, so ``elapsed_time`` is
        the estimated GPU time between two events (milliseconds)."""

        def __init__(self, enable_timing: bool = False, blocking: bool = False, **_: Any):
            self.enable_timing = enable_timing
            self.seconds: float | None = None
            self.device = state.current

        def record(self, stream: Any = None) -> None:
            if stream is not None:
                self.device = stream.device_index
            est = state.devices[self.device].estimate
            self.seconds = est.seconds if est is not None else 0.0

        def wait(self, stream: Any = None) -> None: ...
        def query(self) -> bool:
            return True

        def synchronize(self) -> None:
            state.record_sync("event.synchronize")

        def elapsed_time(self, end_event: Event) -> float:
            if not (self.enable_timing and end_event.enable_timing):
                raise RuntimeError(
                    "Both events must be created with argument 'enable_timing=True'."
                )
            if self.seconds is None or end_event.seconds is None:
                raise RuntimeError("Both events must be recorded before calculating elapsed time.")
            return (end_event.seconds - self.seconds) * 1e3

    class Stream:
        """``torch.cuda.Stream``: identity and device as on CUDA; work is never pending."""

        def __init__(
            self,
            device: Any = None,
            priority: int = 0,
            *,
            stream_id: int | None = None,
            device_index: int | None = None,
            device_type: int | None = None,
            **_: Any,
        ) -> None:
            self.device_index = index(device) if device_index is None else device_index
            if stream_id is None:
                stream_id, next_stream[0] = next_stream[0], next_stream[0] + 1
            self.stream_id = stream_id
            self.device_type = 1
            self.priority = priority

        @property
        def device(self) -> torch.device:
            return torch.device("cuda", self.device_index)

        @property
        def cuda_stream(self) -> int:
            return self.stream_id

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Stream) and (other.device_index, other.stream_id) == (
                self.device_index,
                self.stream_id,
            )

        def __hash__(self) -> int:
            return hash((self.device_index, self.stream_id))

        def __repr__(self) -> str:
            return (
                f"<torch.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.stream_id}>"
            )

        def synchronize(self) -> None:
            state.record_sync("stream.synchronize")

        def wait_stream(self, stream: Any) -> None: ...
        def wait_event(self, event: Any) -> None: ...
        def query(self) -> bool:
            return True

        def is_capturing(self) -> bool:
            return False

        def record_event(self, event: Any = None) -> Any:
            event = event or Event()
            event.record(self)
            return event

        def __enter__(self) -> Stream:
            self._ctx = torch.cuda.stream(self)  # type: ignore[arg-type]
            self._ctx.__enter__()
            return self

        def __exit__(self, *exc: object) -> None:
            self._ctx.__exit__(*exc)

    cuda: dict[str, Any] = {
        "is_available": lambda: count() > 0,
        "is_initialized": lambda: True,
        "_initialized": True,  # read directly by torch.utils.checkpoint (had_device_in_fwd)
        "_is_in_bad_fork": lambda: state.bad_fork,
        "_lazy_init": lazy_init,
        "init": lazy_init,
        "device_count": count,
        "current_device": lambda: state.current,
        "set_device": set_device,
        "get_device_name": device_name,
        "get_device_properties": properties,
        "_get_device_properties": properties,
        "get_device_capability": lambda device=None: (
            (properties(device).major, properties(device).minor)
        ),
        "mem_get_info": mem_get_info,
        "list_gpu_processes": lambda device=None: (
            f"GPU:{index(device)}\nno processes are running (simulated)"
        ),
        "default_generators": tuple(d.generator for d in state.devices),
        "Stream": Stream,
        "Event": Event,
    }
    capi: dict[str, Any] = {
        "_cuda_getDeviceCount": count,
        "_cuda_getDevice": lambda: state.current,
        "_cuda_setDevice": set_device,
        "_cuda_exchangeDevice": exchange,
        "_cuda_maybeExchangeDevice": exchange,
        "_cuda_init": lambda: None,
        "_cuda_isInBadFork": lambda: state.bad_fork,
        "_cuda_getArchFlags": lambda: _ARCH_FLAGS,
        "_cuda_synchronize": synchronize,
        "_cuda_memoryStats": memory_stats,
        "_cuda_resetPeakMemoryStats": reset_peak,
        "_cuda_resetAccumulatedMemoryStats": lambda device=None: None,
        "_cuda_emptyCache": state.empty_cache,
        "_cuda_memorySnapshot": snapshot,
        "_cuda_setMemoryFraction": fraction,
        "_cuda_getMemoryFraction": lambda device=None: (
            state.devices[index(device)].allocator.memory_fraction
        ),
        "_cuda_getCurrentStream": current,
        "_cuda_getDefaultStream": lambda device: (0, index(device), 1),
        "_cuda_getCurrentRawStream": lambda device: current(device)[0],
        "_cuda_setStream": set_stream,
        **_sync_debug.bindings(),
        "_cuda_record_memory_history": record_history,
        "_cuda_record_memory_history_legacy": lambda enabled, *a, **k: record_history(
            "all" if enabled else None
        ),
        "_cuda_getAllocatorBackend": lambda: "native",
        # torch.accelerator (2.6+): the same answers through its generic bindings
        "_accelerator_getAccelerator": lambda: torch.device("cuda"),
        "_accelerator_getDeviceIndex": lambda: state.current,
        "_accelerator_setDeviceIndex": set_device,
        "_accelerator_exchangeDevice": exchange,
        "_accelerator_maybeExchangeDevice": exchange,
        "_accelerator_synchronizeDevice": synchronize,
        "_accelerator_getDeviceStats": lambda device: memory_stats(device),
        "_accelerator_resetPeakStats": reset_peak,
        "_accelerator_resetAccumulatedStats": lambda device=None: None,
        "_accelerator_emptyCache": state.empty_cache,
        "_accelerator_emptyHostCache": lambda: None,
        "_accelerator_getMemoryInfo": mem_get_info,
        "_accelerator_isAllocatorInitialized": lambda: True,
        "_accelerator_getStream": lambda device: Stream(
            stream_id=current(device)[0], device_index=index(device)
        ),
        "_accelerator_setStream": lambda stream: set_stream(stream.stream_id, stream.device_index),
        "_accelerator_getDeviceCapability": lambda device=None: {
            "supported_dtypes": [torch.float32, torch.float16, torch.bfloat16]
        },
    }
    cuda["manual_seed_all"] = seed_all
    cuda["_exchange_device"] = exchange
    cuda["_maybe_exchange_device"] = exchange
    capi.update(_comm_api())
    return cuda, capi


def _comm_api() -> dict[str, Any]:
    """The collectives ``nn.DataParallel`` uses (torch/nn/parallel/comm.py), as copies between
    simulated devices — so their memory and device-to-device traffic are accounted."""

    def on(d: int) -> torch.device:
        return torch.device("cuda", d)

    def broadcast(tensor: torch.Tensor, devices: list[int]) -> list[torch.Tensor]:
        return [tensor if tensor.device == on(d) else tensor.to(on(d)) for d in devices]

    def broadcast_coalesced(
        tensors: list[torch.Tensor], devices: list[int], buffer_size: int = 0
    ) -> list[list[torch.Tensor]]:
        return [[t if t.device == on(d) else t.to(on(d)) for t in tensors] for d in devices]

    def scatter(
        tensor: torch.Tensor,
        devices: list[int],
        chunk_sizes: list[int] | None = None,
        dim: int = 0,
        streams: Any = None,
    ) -> list[torch.Tensor]:
        chunks = (
            tensor.split(list(chunk_sizes), dim) if chunk_sizes else tensor.chunk(len(devices), dim)
        )
        return [c.to(on(d)).contiguous() for c, d in zip(chunks, devices, strict=False)]

    def gather(tensors: list[torch.Tensor], dim: int, destination: int | None) -> torch.Tensor:
        dest = torch.device("cpu") if destination is None or destination < 0 else on(destination)
        return torch.cat([t.to(dest) for t in tensors], dim)

    def scatter_out(
        tensor: torch.Tensor, out: list[torch.Tensor], dim: int, streams: Any = None
    ) -> list[torch.Tensor]:
        chunks = tensor.split([o.shape[dim] for o in out], dim)
        return [o.copy_(c) for o, c in zip(out, chunks, strict=True)]

    return {
        "_broadcast": broadcast,
        "_broadcast_out": lambda tensor, out: [o.copy_(tensor) for o in out],
        "_broadcast_coalesced": broadcast_coalesced,
        "_scatter": scatter,
        "_scatter_out": scatter_out,
        "_gather": gather,
        "_gather_out": lambda tensors, out, dim: torch.cat(
            [t.to(out.device) for t in tensors], dim, out=out
        ),
    }


def _accelerator_api(count: Callable[[], int]) -> dict[str, Any]:
    return {
        "is_available": lambda check_fork=False: count() > 0,
        "device_count": count,
        "current_accelerator": lambda check_available=False: torch.device("cuda"),
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
    cuda_api, capi = _api(state, fmode)
    patches: list[tuple[Any, str, Any]] = [(torch.cuda, k, v) for k, v in cuda_api.items()]
    # torch.cuda's submodules import some of these by name: replace those copies too
    for mod in list(vars(torch.cuda).values()):
        if isinstance(mod, types.ModuleType) and mod.__name__.startswith("torch.cuda."):
            patches += [
                (mod, k, v)
                for k, v in cuda_api.items()
                if k in vars(mod) and vars(mod)[k] is vars(torch.cuda).get(k)
            ]
    patches += [(torch._C, k, v) for k, v in capi.items()]
    accel = getattr(torch, "accelerator", None)
    if isinstance(accel, types.ModuleType):
        patches += [(accel, k, v) for k, v in _accelerator_api(cuda_api["device_count"]).items()]
    pinned = state.pinned
    real_is_pinned = torch.Tensor.is_pinned

    def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
        if state.label(self) is not None:
            raise RuntimeError(f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")
        if self.untyped_storage() in pinned:
            return self
        out = self.clone() if not self.is_meta else self
        pinned.add(out.untyped_storage())
        return out

    def is_pinned(self: torch.Tensor, device: Any = None) -> bool:
        if self.is_meta or state.label(self) is not None:
            return False
        return self.untyped_storage() in pinned or bool(real_is_pinned(self))

    def storage_data_ptr(self: Any) -> int:
        address = state.address(self) if state.storage_label(self) is not None else None
        return address if address is not None else real_storage_data_ptr(self)

    real_storage_data_ptr = torch.UntypedStorage.data_ptr
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
    files = SimFiles(state, fmode.resolve, in_place=write_files)
    for module in (torch, torch.serialization):
        patches.append((module, "save", functools.partial(files.save, torch.serialization.save)))
        patches.append((module, "load", functools.partial(files.load, torch.serialization.load)))
    nvtx = getattr(torch.cuda, "nvtx", None)
    patches += legacy_patches(state)
    patches += [
        (torch.Tensor, "pin_memory", pin_memory),
        (torch.Tensor, "is_pinned", is_pinned),
        (torch.Tensor, "record_stream", lambda self, stream: None),
        (torch.UntypedStorage, "data_ptr", storage_data_ptr),
        (torch.UntypedStorage, "resize_", storage_resize),
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
        (torch.backends.cudnn, "is_available", lambda: True),
        # DataParallel's reduce and broadcast take NCCL where torch was built with it (a
        # CUDA build): simulated GPUs go the copy-and-add way, with the same transfers
        (torch.cuda.nccl, "is_available", lambda tensors: False),
        (torch.backends.cudnn, "version", lambda: CUDNN_VERSION),
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
        with files.registered(), _cuda_rules.installed(state):
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
