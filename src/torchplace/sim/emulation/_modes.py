"""The two torch modes that make simulated GPUs work.

``SimFunctionMode`` (a ``TorchFunctionMode``, above autograd) is what the user's code
talks to: it rewrites ``device="cuda..."`` (and the default device) to the backing
device, implements ``.to()``, ``.cuda()``, ``.cpu()`` and tensor creation from data across
host and simulated devices, answers ``Tensor.device``, ``is_cuda``, ``get_device()``,
``type()`` and ``data_ptr()`` from the simulator's labels, reads values (real ones, or
placeholders), and runs the SDPA kernel the target GPU would choose (torchplace.sim.rules._sdpa;
CUDA autocast applies in the dispatcher: torchplace.sim.rules._autocast).

``SimDispatchMode`` (a ``TorchDispatchMode``, below autograd, so it also sees the backward
pass and the optimizers) propagates labels from inputs to outputs, enforces CUDA's device
and dtype rules with PyTorch's own errors (:mod:`torchplace.sim.rules._device_rules`) and CUDA's
deterministic-algorithm alerts (:mod:`torchplace.sim.rules._determinism`), counts syncs,
routes random numbers through each simulated device's generator, and accounts every new
storage.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor as _FakeTensor
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from torchplace.cost import call_tensors, runs_kernel, tensors_in
from torchplace.sim.accounting import _comm, _hostmem
from torchplace.sim.accounting._state import UNKNOWN, SimState, storage_key
from torchplace.sim.emulation._bindings_streams import invalid_ordinal, tag_backward_stream
from torchplace.sim.rules import (
    _autocast,
    _backends,
    _cuda_ops,
    _determinism,
    _device_rules,
    _index_limits,
    _sdpa,
    _sync_debug,
)
from torchplace.sim.rules._cuda_path import PATH_CACHE as _PATH_CACHE
from torchplace.sim.rules._cuda_path import applies, cuda_path, path_of, wider
from torchplace.sim.rules._kernels import REAL_KERNELS
from torchplace.sim.rules._python_functions import reads_device, unguarded

__all__ = ["SimDispatchMode", "SimFunctionMode", "placeholder_scalar"]

_META = torch.device("meta")
_PY_FUNCTION = type(lambda: None)
_deterministic = torch.are_deterministic_algorithms_enabled
_tf_enabled = torch._C._is_torch_function_mode_enabled
_T = torch.Tensor
_aten = torch.ops.aten
_GEMMS = {
    _aten.mm.default,
    _aten.addmm.default,
    _aten.bmm.default,
    _aten.baddbmm.default,
    _aten.addbmm.default,
}
_COPY = _aten.copy_.default
_CONVOLUTION = _aten.convolution.default
_TO_COPY = _aten._to_copy.default
_ITEM = _aten._local_scalar_dense.default
# torch.nn.functional's own functions (the simulation installs reentrant wrappers in their
# place: see SimFunctionMode.reentrant)
_SDPA = F.scaled_dot_product_attention
_DROPOUT = F.dropout
_FALLBACK_MAX_NUMEL = 1 << 24  # placeholder mode: ops without a meta kernel run on zeros
# Operations whose output shape or value needs the GPU's data on the host: CUDA waits
# (one_hot and repeat_interleave unless given the output size: _count_sync).
_SYNC_OPS = {
    "aten::equal", "aten::is_nonzero", "aten::bincount", "aten::one_hot",
    "aten::repeat_interleave",
}  # fmt: skip
#: Reads of tensor metadata, property reads and writes (``t.shape``, ``t.T``: views are
#: labelled below autograd; ``p.grad = None``) and ``torch.device(...)``: they make no tensor
#: on a device and no device rule applies to them, so the function mode passes them straight
#: through (the simulated device itself is answered by handlers, looked up first). A
#: training step makes thousands of them.
_PLAIN = frozenset(
    getattr(torch.Tensor, name)
    for name in (
        "dim", "size", "stride", "numel", "nelement", "element_size", "storage_offset",
        "untyped_storage", "is_complex", "is_floating_point", "is_contiguous",
    )
) | {torch.is_complex, torch.is_floating_point, torch.device}  # fmt: skip
_PROPERTY_ACCESS = frozenset(("__get__", "__set__"))
_METHOD_WRAPPER = type(vars(torch._C.TensorBase)["shape"].__get__)
_SEEDED = torch.Tag.nondeterministic_seeded
_DYNAMIC = torch.Tag.dynamic_output_shape
_HOST = -1  # the label of an explicit device= on the host (see SimFunctionMode.on)
_INDEX_OPS = ("aten::index", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_")
_INDEX_LIMITS = _index_limits.LIMITS  # ops whose CUDA kernel indexes with 32 bits only
_DTYPE_RULES = {"aten::_scaled_mm"}  # ops _device_rules.check_dtypes checks


def _non_blocking(args: Any, kwargs: Any) -> bool:
    """copy_(dst, src, non_blocking)'s flag."""
    return bool(args[2]) if len(args) > 2 else bool(kwargs.get("non_blocking"))


def _host_to_device(
    state: SimState, host: torch.Tensor, label: int, nbytes: int, non_blocking: bool
) -> None:
    """Account a copy of ``nbytes`` from ``host`` onto simulated GPU ``label``. A blocking
    one is ``memcpy_and_sync`` (Copy.cu; c10/cuda/CUDAFunctions.h): the sync debug mode
    sees it, and the host waits for the device's work enqueued so far."""
    if not non_blocking:
        _sync_debug.check()
    state.transfer("h2d", nbytes, label)
    if not non_blocking:
        state.copy_waited(label)
    state.pinned.copied(host, label, non_blocking)


@dataclass(frozen=True)
class _Op:
    """What the dispatch mode needs to know of an aten overload, read once per overload
    (its schema name, tags and the tables below are Python calls to reach)."""

    name: str  # the schema name, "aten::add"
    index: bool  # the output is on the first tensor's device (the indexed one; _device_rules.MOVED)
    host_arguments: bool  # takes an argument that must be on the host (_device_rules)
    host_outputs: tuple[int, ...]  # outputs the CUDA kernel makes on the host
    gemm: bool  # a cuBLAS matrix product (cuBLAS allocates its workspace at the first)
    dtype_rule: (
        bool  # the GPU's check depends on its compute capability (_device_rules.check_dtypes)
    )
    cuda: _cuda_ops.CudaRule | None  # what CUDA's build does that the CPU's does not
    foreach: bool  # a _foreach_ op: its outputs are on the devices of its first list
    may_sync: bool  # may make CUDA wait for the GPU (_count_sync decides)
    seeded: bool  # draws random numbers
    takes_generator: bool
    kernel: Callable[[Any, Any, torch.Generator], Any] | None  # a CUDA-only kernel's values
    collective: str | None  # a c10d collective's family
    host_factory: bool  # makes a tensor from a size (checked against host memory)
    view: bool  # its outputs alias an input's storage: nothing new to account
    hostmem: int  # how _hostmem.need bounds the host memory it takes (_hostmem.bound_kind)
    metadata: bool  # changes a tensor's metadata in place (resize_, t_): reads no values
    priced: bool  # runs a kernel the cost model prices (not a view or metadata op)
    func: Any  # the overload (_OPS is keyed by its id: OpOverload hashes in Python)
    call: Callable[..., Any]  # calls it: an OpOverload's C++ operator, without the
    # Python frame of OpOverload.__call__ (which only calls it: torch/_ops.py)
    alerts: tuple[dict[str, Any], ...]  # its CUDA kernel's deterministic-algorithm alerts
    backend: bool  # its CUDA kernel picks a backend whose refusal differs (_backends)
    stats: bool  # a norm kernel whose statistics CUDA keeps in fp32 (_backends.STATS_OPS)

    @staticmethod
    def of(func: Any) -> _Op:
        name = func._schema.name
        sync = name in _INDEX_OPS or name in _SYNC_OPS or _DYNAMIC in func.tags
        return _Op(
            name, name in _INDEX_OPS or name in _device_rules.MOVED,
            name in _device_rules.HOST_ARGUMENTS,
            _device_rules.HOST_OUTPUTS.get(name, ()), func in _GEMMS, name in _DTYPE_RULES,
            _cuda_ops.rule_for(func), name.startswith("aten::_foreach_"), sync,
            _SEEDED in func.tags,
            any(a.name == "generator" for a in func._schema.arguments),
            REAL_KERNELS.get(func), _comm.collective_of(func), func in _HOST_FACTORIES,
            func.is_view, _hostmem.bound_kind(func), _hostmem.inplace_metadata(func),
            runs_kernel(func), func,
            func._op if type(func) is torch._ops.OpOverload else func,
            _determinism.alerts_for(name, func._schema.overload_name),
            func in _backends.PICKS_BACKEND, func in _backends.STATS_OPS,
        )  # fmt: skip


_OPS: dict[int, _Op] = {}


def _not_simulated_layout(t: torch.Tensor, label: int, op: str) -> NotImplementedError:
    return NotImplementedError(
        f"torchplace sim does not simulate sparse tensors on a GPU: {t.layout} on "
        f"cuda:{label} (aten.{op.split('::')[-1]}). Keep sparse tensors on the CPU, or make "
        "them dense (.to_dense()) first."
    )


def _channels_last(t: Any) -> bool:
    return (
        isinstance(t, torch.Tensor) and t.dim() == 4 and not t.is_contiguous()
        and t.is_contiguous(memory_format=torch.channels_last)
    )  # fmt: skip


def _cudnn_layout(args: Any, out: Any) -> Any:
    """A convolution's output in the layout cuDNN gives it: channels-last when the input or
    the weight is (aten/src/ATen/native/ConvUtils.h, cudnn_conv_suggest_memory_format). The
    meta function lays it out as the CPU would, contiguous, and the layout decides the
    kernels that follow (cuDNN's persistent batch norm, the tensor cores' transposes)."""
    if (
        isinstance(out, torch.Tensor) and out.dim() == 4 and out.is_meta
        and not out.is_contiguous(memory_format=torch.channels_last)
        and (_channels_last(args[0]) or _channels_last(args[1]))
    ):  # fmt: skip
        return torch.empty(out.shape, dtype=out.dtype, device=out.device,
                           memory_format=torch.channels_last)  # fmt: skip
    return out


def placeholder_scalar(dtype: torch.dtype) -> bool | int | float | complex:
    """The documented stand-in for a value read from a simulated GPU: zero of the dtype."""
    if dtype == torch.bool:
        return False
    if dtype.is_complex:
        return 0j
    if dtype.is_floating_point:
        return 0.0
    return 0


class _Mover(torch.autograd.Function):
    """A differentiable move of placeholder values to the host (which ``aten._to_copy``
    cannot make: a meta tensor has no data); every other move is ``aten._to_copy``'s own
    (``SimFunctionMode._apply``)."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, make: Callable[[], torch.Tensor], back: Any) -> Any:
        ctx.back, ctx.dtype = back, t.dtype
        return make()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        with torch._C.DisableTorchFunction():  # the simulator's own code: real devices
            return ctx.back(grad).to(ctx.dtype), None, None


def _move_gradient(node: Any, index: int, back: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """After autograd ``node`` computes its ``index``-th gradient, move it with ``back`` to
    the device its input is on (which the node's own ``grad.to(device)`` cannot tell from
    a simulated device's backing)."""

    def moved(grads: tuple[Any, ...], _: Any) -> tuple[Any, ...]:
        if grads[index] is None:
            return grads
        with torch._C.DisableTorchFunction():  # the simulator's own code: real devices
            return (*grads[:index], back(grads[index]), *grads[index + 1 :])

    node.register_hook(moved)


class _Local(threading.local):
    target: int | None = None  # label for factory outputs inside a simulated call
    explicit: int | None = None  # label given by an explicit device= argument
    quiet: bool = False  # a read the function mode has already counted
    shown: tuple[int, int] | None = None  # (id, label) of a tensor being printed
    copying: bool = False  # making a copy's output: priced as a transfer, not as a kernel


class SimDispatchMode(TorchDispatchMode):
    """Labels, device rules, syncs and memory accounting for every aten op."""

    def __init__(self, state: SimState, on_op: Callable[..., None] | None = None) -> None:
        super().__init__()
        self.state = state
        self.local = _Local()
        self.on_op = on_op

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # TorchDispatchMode wraps __torch_dispatch__ in torch._disable_dynamo unless this
        # says False (torch/utils/_python_dispatch.py): a few µs on every aten op. Under
        # simulation torch.compile runs eagerly, so Dynamo never traces this mode.
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        for t in types:
            if t is not torch.Tensor and not issubclass(t, torch.nn.Parameter):
                if issubclass(t, _FakeTensor):  # torch's own shape propagation (DTensor's)
                    return func(*args, **(kwargs or {}))
                # A wrapper subclass (DTensor, ...): it runs the operation on the plain
                # tensors it holds, which this mode then sees (and labels, and accounts).
                return NotImplemented
        # Reached from C++ (a storage copy, the autograd engine), the function mode may still
        # be active; below autograd only the real devices count.
        if _tf_enabled():
            with torch._C.DisableTorchFunction():
                return self.__torch_dispatch__(func, types, args, kwargs)
        # (the rest in this function, not a call of its own: each Python call costs about a
        # microsecond in a training step, where the kernel before left the caches cold)
        kwargs = kwargs or {}
        state, local = self.state, self.local
        op = _OPS.get(id(func))
        if op is None or op.func is not func:
            op = _OPS[id(func)] = _Op.of(func)
        if op.view:  # one tensor's storage seen anew: its label is the storage's already
            if state.host_backed:  # self._run's case for a view, inline
                return op.call(*args, **kwargs)
            return self._run(func, op, args, kwargs, None)
        leaves = call_tensors(args, kwargs)
        # id -> label of the arguments on simulated devices; whether some other is not
        labels, on_host = state.labels_of(leaves)  # torch functions are disabled here

        explicit = local.explicit
        if func is _COPY and (labels or explicit is not None):
            return self._copy(args, kwargs)
        if (
            func is _TO_COPY
            and labels
            and not state.real
            and explicit is None
            and kwargs.get("device") is not None
            and torch.device(kwargs["device"]).type == "cpu"
        ):  # C++ (an autograd node) moving placeholders to the host
            return self._placeholders_to_host(args[0], kwargs, labels[id(args[0])])
        if explicit is not None:
            out_label: int | None = None if explicit == _HOST else explicit
        elif labels:
            if on_host or op.host_arguments or (len(labels) > 1 and len(set(labels.values())) > 1):

                def dev(t: torch.Tensor) -> str:
                    label = labels.get(id(t))
                    if label is None:
                        label = state.label(t)
                    return f"cuda:{label}" if label is not None else str(t.device.type)

                verdict = None  # CUDA's own outcome for this mix of one GPU and the host
                if op.cuda is not None and on_host and len(set(labels.values())) == 1:
                    gpu = next(iter(labels.values()))
                    verdict = op.cuda.mixing(leaves, [id(t) in labels for t in leaves], gpu)
                if verdict is None:
                    _device_rules.check(func, args, kwargs, dev)
                elif verdict is not True:
                    raise verdict
                composite = _device_rules.composite_key(func)
                if composite is not None:  # (where CUDA's rules or its recorded outcome let it run)
                    first = labels.get(id(leaves[0]))
                    return self._composite(func, composite, args, kwargs, first)
            if op.index and args and isinstance(args[0], torch.Tensor):
                out_label = labels.get(id(args[0]))  # the indexed tensor's device
                if out_label is None:
                    return func(*args, **kwargs)
            else:
                out_label = next(iter(labels.values()))  # the first simulated argument's
        elif not leaves:
            out_label = local.target  # a factory inside a simulated call (or None)
        elif func is _TO_COPY and local.target is not None and _to_backing(kwargs, state):
            # C++ code called from Python (DDP, c10d) moving host data to the device of
            # tensors it was given: a host-to-device copy onto the simulated device
            out_label = local.target
            state.transfer("h2d", sum(t.nbytes for t in leaves), out_label)
            if not kwargs.get("non_blocking"):
                _sync_debug.check()  # a blocking copy: memcpy_and_sync (Copy.cu)
                state.copy_waited(out_label)
        else:
            out_label = None
        if out_label is None:
            if not leaves and op.host_factory:
                _check_host_factory(state, args, kwargs)
            if kwargs.get("pin_memory"):  # page-locked host memory: a CUDA build can make it
                out = func(*args, **{**kwargs, "pin_memory": False})
                return state.pinned.pin(out)  # the host caching allocator's memory
            return op.call(*args, **kwargs)

        device = state.devices[out_label]
        if op.alerts:
            _determinism.check(func, op.alerts, args, kwargs, state.real)
        cuda = op.cuda  # a kernel or dtype the CUDA build lacks (generated data)
        if cuda is not None and (not leaves or leaves[0].dtype in cuda.first or cuda.missing):
            refused = cuda.refusal(leaves, args, kwargs, func)
            if refused is not None:
                if op.backend:  # the refusal of the backend CUDA's kernel picks
                    refused = _backends.refusal(func, cuda, leaves, args, kwargs) or refused
                raise refused
        if labels and op.dtype_rule:
            _device_rules.check_dtypes(func, args, device.capability)
        if labels and op.name in _INDEX_LIMITS:
            _index_limits.check(op.name, args, kwargs)
        if op.gemm:
            state.ensure_cublas_workspace(out_label)
        if func is _ITEM:
            if not local.quiet:
                state.record_sync("item")
                state.transfer("d2h", args[0].element_size(), out_label)
            if not state.real:
                return placeholder_scalar(args[0].dtype)
            return func(*args, **kwargs)
        if op.may_sync:
            self._count_sync(op, args, kwargs, labels)
        if state.real:  # will the host hold what the op makes? (_hostmem; before it runs)
            room = state.room
            need = _hostmem.need(op.hostmem, func, args, kwargs, leaves)
            if need <= room.left:  # type: ignore[union-attr]  # (HostRoom.take, inline)
                room.left -= need  # type: ignore[union-attr]
            else:
                self._short_of_host(func, op, args, kwargs, leaves, out_label, need)
        if not state.host_backed and any(not t.is_meta and t.dim() == 0 for t in leaves):
            args, kwargs = tree_map(_scalar_to_meta, (args, kwargs))
        try:
            if state.real and op.kernel is None and not op.seeded:  # self._run's, inline
                out = op.call(*args, **kwargs)
            else:
                out = self._run(func, op, args, kwargs, device)
        except (RuntimeError, NotImplementedError) as e:
            if (
                state.real
                and op.cuda is not None
                and op.cuda.widens(
                    leaves, args, kwargs, pointwise=torch.Tag.pointwise in func.tags, func=func
                )
            ):
                out = _cuda_ops.run_wider(func, args, kwargs, e)  # CUDA runs what the CPU lacks
            elif state.real and "can't allocate memory" in str(e):
                self._host_allocation_failed(func, op, args, kwargs, out_label)
                out = self._run(func, op, args, kwargs, device)  # values="auto": placeholders now
            else:
                raise
        if op.stats and state.real:
            out = _backends.accumulate_stats(func, args, kwargs, out)
        outs = [out] if isinstance(out, torch.Tensor) else tensors_in(out)
        if op.foreach and isinstance(out, (list, tuple)):
            firsts = next(a for a in args if isinstance(a, (list, tuple)))
            for t, ref in zip(out, firsts, strict=False):
                if isinstance(t, torch.Tensor) and isinstance(ref, torch.Tensor):
                    state.register(t, labels.get(id(ref), out_label))
        else:
            host: Any = ()  # storages of host inputs (an output aliasing one stays there)
            if on_host:
                host = {storage_key(t) for t in leaves if id(t) not in labels}
            host_outputs: Any = ()
            if op.host_outputs:
                found = _device_rules.host_outputs(op.name, op.host_outputs, args, kwargs)
                host_outputs = {id(out[i]) for i in found}
            on_backing = state._on_backing
            for t in outs:
                if id(t) in host_outputs:
                    continue  # an output the CUDA kernel makes on the host
                if t.layout != torch.strided:
                    raise _not_simulated_layout(t, out_label, op.name)
                if on_backing(t):
                    storage = t.untyped_storage()
                    if not host or storage._cdata not in host:
                        state.register_storage(storage, out_label)
        if op.collective is not None:
            tensors = leaves + outs
            size = max((t.nbytes for t in tensors), default=0)
            state.collective(out_label, op.collective, size, _group_size(args, kwargs))
            if op.collective in ("all_gather", "reduce_scatter"):
                state.classify([t for t in tensors if t.nbytes == size], "communication")
        elif self.on_op is not None and op.priced and not local.copying:
            self.on_op(func, args, kwargs, out, out_label, leaves, outs)
        return out

    def _composite(self, func: Any, key: Any, args: Any, kwargs: Any, first: int | None) -> Any:
        """Run an operator without a CUDA kernel of its own through its composite kernel
        (``_device_rules.composite_key``), with this mode seeing its inner operators: on a GPU they
        check devices and put the result where it lands (``slice_scatter`` of a host
        ``self``: ``clone(self)``, then ``copy_(src)`` into it, on the host;
        aten/src/ATen/native/TensorShape.cpp). The tensors it makes take its first tensor's
        options, as composites write them (``at::zeros(..., self.options())``). It runs only
        once the call passed the device rules (``_device_rules.check``) or CUDA's recorded outcome
        for the mix let it run: a check a composite makes on ``.device()`` itself
        (``block_diag``'s "input tensors must all be on the same device") would read the
        backing's device and pass."""
        local = self.local
        saved = local.target
        local.target = first
        try:
            with self:
                return func._op_dk(key, *args, **kwargs)
        finally:
            local.target = saved

    def _run(self, func: Any, op: _Op, args: Any, kwargs: Any, device: Any) -> Any:
        if not self.state.real:
            if self.state.host_backed:
                return self._placeholders_on_host(func, op, args, kwargs)
            try:
                out = func(*args, **kwargs)
            except NotImplementedError:
                return self._run_on_zeros(func, args, kwargs)
            return _cudnn_layout(args, out) if func is _CONVOLUTION else out
        if op.kernel is not None:  # a CUDA-only kernel, its values computed on the CPU
            with torch.no_grad():
                return op.kernel(args, kwargs, device.generator)
        if not op.seeded:
            return func(*args, **kwargs)
        if kwargs.get("generator") is not None:  # the script's own: its draw is counted in
            return func(*args, **kwargs)  # __torch_function__, which sees the object it holds
        # Random numbers on a simulated GPU come from that GPU's generator (seeded by
        # torch.manual_seed / torch.cuda.manual_seed), so host random streams stay as
        # they would be on a GPU machine; its state is CUDA's (sim/emulation/_philox.py).
        gen = device.generator
        if op.takes_generator:
            return _draw(gen, lambda: func(*args, **{**kwargs, "generator": gen}))

        def on_the_host_generator() -> Any:
            host = torch.default_generator
            saved = host.get_state()
            host.set_state(torch._C.Generator.get_state(gen))  # the CPU state beneath
            try:
                return func(*args, **kwargs)
            finally:
                torch._C.Generator.set_state(gen, host.get_state())
                host.set_state(saved)

        return _draw(gen, on_the_host_generator)

    def _short_of_host(
        self, func: Any, op: _Op, args: Any, kwargs: Any, leaves: Any, label: int, need: int
    ) -> None:
        """The room left has not the ``need`` bytes ``func`` would make: look at the memory
        again, with the exact figure if ``need`` was a bound, and if the host has no room,
        let the state decide (the GPU's out-of-memory error, a switch to placeholder
        values, or HostMemoryError)."""
        state = self.state
        assert state.room is not None  # real values
        if state.room.take(need, state.host_bytes):
            return
        exact = _hostmem.need(_hostmem.EXACT, func, args, kwargs, leaves)
        if not state.room.take(exact, state.host_bytes):
            sizes = _hostmem.outputs(func, args, kwargs)
            state.short_of_host(f"aten.{op.name.split('::')[-1]}", exact, sizes, label)

    def _host_allocation_failed(
        self, func: Any, op: _Op, args: Any, kwargs: Any, label: int
    ) -> None:
        """The host could not allocate a real-values output after all (sizes not foreseen:
        an operation without a meta function). The state decides, as before an operation."""
        sizes = _hostmem.outputs(func, args, kwargs)
        # (it raises, or returns having switched to placeholder values)
        self.state.short_of_host(f"aten.{op.name.split('::')[-1]}", sum(sizes), sizes, label)

    def _placeholders_on_host(self, func: Any, op: _Op, args: Any, kwargs: Any) -> Any:
        """An operation after a switch to placeholder values (the backing stays the host):
        its outputs' shapes from the meta function, in host memory that is allocated and
        never written, so never resident. In-place and ``out=`` outputs are their arguments,
        left as they were; metadata changes (``resize_``, ``t_``) run as they are."""
        if op.metadata:
            return op.call(*args, **kwargs)
        flat, spec = tree_flatten((args, kwargs))
        originals: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # by the copy's storage
        copies: list[Any] = []
        for a in flat:
            if isinstance(a, torch.Tensor):
                m = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=_META)
                originals[m.untyped_storage()._cdata] = (m, a)
                copies.append(m)
            elif isinstance(a, torch.device):
                copies.append(_META)
            else:  # (a generator draws nothing for placeholders)
                copies.append(None if isinstance(a, torch.Generator) else a)
        margs, mkwargs = tree_unflatten(copies, spec)
        if "device" in mkwargs:
            mkwargs["device"] = _META
        try:
            out = func(*margs, **mkwargs)
        except NotImplementedError:
            out = self._run_on_zeros(func, margs, mkwargs)

        def on_host(t: Any) -> Any:
            if not isinstance(t, torch.Tensor):
                return t
            found = originals.get(t.untyped_storage()._cdata)
            if found is None:
                return _hostmem.hollow(t.shape, t.stride(), t.dtype)
            copy, original = found
            if t is not copy:  # a view of an argument (aten._unsafe_view)
                offset = original.storage_offset() + t.storage_offset() - copy.storage_offset()
                return original.as_strided(t.shape, t.stride(), offset)
            if original.shape != t.shape:  # an out= argument the op resizes
                original.resize_(t.shape)
            return original

        return tree_map(on_host, out)

    def _count_sync(self, op: _Op, args: Any, kwargs: Any, labels: dict[int, int]) -> None:
        """Operations that make CUDA wait for the GPU: their output needs its data."""
        name = op.name
        if op.index:
            # A boolean mask on the GPU becomes indices through nonzero, which waits for the
            # GPU — unless index_put_ can use masked_fill_: one mask on self's device and a
            # one-element CPU value (TensorAdvancedIndexing.cpp canDispatchToMaskedFill).
            indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
            masks = [
                t
                for t in indices
                if t is not None and id(t) in labels and t.dtype in (torch.bool, torch.uint8)
            ]
            if not masks:
                return
            if name != "aten::index":
                value = args[2] if len(args) > 2 else kwargs.get("values")
                accumulate = bool(args[3] if len(args) > 3 else kwargs.get("accumulate"))
                defined = [t for t in indices if t is not None]
                if (
                    not accumulate
                    and len(defined) == 1
                    and isinstance(value, torch.Tensor)
                    and value.numel() == 1
                    and id(value) not in labels
                ):
                    return
            self.state.record_sync("nonzero (boolean mask)")
            return
        if (
            name == "aten::one_hot"
            and (args[1] if len(args) > 1 else kwargs.get("num_classes", -1)) != -1
        ):
            return
        if name == "aten::repeat_interleave" and kwargs.get("output_size") is not None:
            return
        self.state.record_sync(name.split("::", 1)[-1])

    def _copy(self, args: Any, kwargs: Any) -> Any:
        """``dst.copy_(src)`` across the host and simulated devices."""
        dst, src = args[0], args[1]
        state = self.state
        dst_label, src_label = state.label(dst), state.label(src)
        nbytes = dst.numel() * dst.element_size()
        if dst_label is not None and src_label is None:
            if src.is_meta:
                raise NotImplementedError("Cannot copy out of meta tensor; no data!")
            _host_to_device(state, src, dst_label, nbytes, _non_blocking(args, kwargs))
            if not state.real:
                if state.host_backed:
                    return dst  # placeholder values since a switch: nothing to write
                src = torch.empty_like(src, device=_META)
        elif dst_label is None and src_label is not None:
            state.transfer("d2h", nbytes, src_label)
            state.pinned.copied(dst, src_label, _non_blocking(args, kwargs))
            if not _non_blocking(args, kwargs):
                state.record_sync("copy_ to host")
            if not state.real:
                return dst.zero_()  # placeholder: the simulated GPU holds no data
        elif dst_label is not None and src_label is not None and dst_label != src_label:
            state.transfer("d2d", nbytes, src_label)
        if dst_label is not None and state.host_backed and not state.real:
            return dst  # placeholder values since a switch: nothing to write
        return _COPY(dst, src, *args[2:], **kwargs)

    def _placeholders_to_host(self, x: torch.Tensor, kwargs: Any, label: int) -> torch.Tensor:
        """``aten._to_copy`` of a simulated tensor to the host from C++ (an autograd node's
        ``grad.to(cpu)``) with placeholder values: zeros, and the transfer."""
        self.state.transfer("d2h", x.numel() * x.element_size(), label)
        self.state.record_sync("to cpu")
        return torch.zeros(x.shape, dtype=kwargs.get("dtype") or x.dtype, device="cpu")

    def _run_on_zeros(self, func: Any, args: Any, kwargs: Any) -> Any:
        """Ops without a meta kernel (data-dependent shapes) run on placeholder zeros."""
        numel = sum(t.numel() for t in tensors_in((args, kwargs)) if t.is_meta)
        name = str(func).split(".")[1] if "." in str(func) else str(func)
        if numel > _FALLBACK_MAX_NUMEL:
            self.state.note(f"{name}: no meta kernel and inputs too large to run on zeros")
            raise NotImplementedError(
                f"torchplace sim cannot model aten.{name} on inputs of {numel} elements with "
                "placeholder values: its output shape depends on the data. Run with "
                "--values real (or simulate(values='real')) to compute it."
            )
        self.state.note(f"{name}: output shape depends on data; computed from placeholder zeros")

        def zeros(t: Any) -> Any:
            if isinstance(t, torch.Tensor) and t.is_meta:
                return torch.zeros(t.shape, dtype=t.dtype, device="cpu")
            return t

        real = func(*tree_map(zeros, args), **tree_map(zeros, kwargs))

        def to_meta(t: Any) -> Any:
            if isinstance(t, torch.Tensor):
                return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=_META)
            return t

        return tree_map(to_meta, real)


_HOST_FACTORIES = {
    _aten.empty.memory_format,
    _aten.empty_strided.default,
    _aten.zeros.default,
    _aten.ones.default,
    _aten.full.default,
    _aten.rand.default,
    _aten.randn.default,
}
_HOST_CHECK_BYTES = 256 * 1024**2  # smaller host tensors are not worth a look at /proc


def _check_host_factory(state: SimState, args: Any, kwargs: Any) -> None:
    """Before a large host tensor is made, stop if the host would run out of memory: under
    simulation, weights a script builds on the host before .cuda() are real host memory."""
    size = args[0] if args else kwargs.get("size", ())
    dtype = kwargs.get("dtype") or torch.get_default_dtype()
    numel = 1
    for n in size:
        numel *= int(n)
    nbytes = numel * dtype.itemsize
    if nbytes >= _HOST_CHECK_BYTES:
        state.check_host_room(nbytes)


def _group_size(args: Any, kwargs: Any) -> int:
    """The number of ranks of a c10d collective's process group (or ``group_size``)."""
    if "group_size" in kwargs:
        return int(kwargs["group_size"])
    for a in tree_flatten((args, kwargs))[0]:
        if isinstance(a, torch.ScriptObject):
            try:
                return int(torch._C._distributed_c10d.ProcessGroup.unbox(a).size())
            except (AttributeError, RuntimeError):
                continue
    ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    return ints[0] if ints else 1


def _metadata_factory(func: Any) -> bool:
    """``torch.*_like`` and ``Tensor.new_*``: factories that read only their tensor
    argument's metadata, so an explicit ``device=`` decides where the result is."""
    name = getattr(func, "__name__", "")
    return name.endswith("_like") or name.startswith("new_")


def _to_backing(kwargs: Any, state: SimState) -> bool:
    device = kwargs.get("device")
    return device is not None and torch.device(device).type == state.backing.type


def _draw(generator: Any, run: Callable[[], Any]) -> Any:
    """A random operation on ``generator``: a simulated CUDA one keeps CUDA's state (the
    object the script holds: in ``__torch_dispatch__`` a generator is torch's own again)."""
    draw = getattr(generator, "draw", None)
    return run() if draw is None else draw(run)


def _check_generator(generator: Any, label: int | None) -> None:
    """aten/src/ATen/core/Generator.h check_generator: a kernel takes only a generator of
    its own device type."""
    gen_type = "cpu" if getattr(generator, "_label", None) is None else "cuda"
    op_type = "cpu" if label is None else "cuda"
    if gen_type != op_type:
        raise RuntimeError(
            f"Expected a '{op_type}' device type for generator but found '{gen_type}'"
        )


def _scalar_to_meta(a: Any) -> Any:
    if isinstance(a, torch.Tensor) and not a.is_meta and a.dim() == 0:
        return torch.empty((), dtype=a.dtype, device=_META)
    return a


def _default_device() -> torch.device | None:
    """The device ``torch.set_default_device`` / ``with torch.device(...)`` set, if any."""
    from torch.utils import _device

    current = getattr(_device, "CURRENT_DEVICE", None)
    return None if current is None else torch.device(current)


def _sdpa_gpu(spec: Any) -> _sdpa.Gpu:
    """What CUDA's attention checks read of a simulated GPU (and the cuDNN the simulated
    build reports: torch.backends.cudnn.version(), answered by the simulation)."""
    major, minor = spec.compute_capability or (0, 0)
    rocm = None if spec.vendor == "nvidia" else (spec.gcn_arch or "")
    return _sdpa.Gpu(major, minor, torch.backends.cudnn.version() or 0, rocm)


def _fused_sdpa(kernel: str, p: _sdpa.Params, scale: float | None) -> torch.Tensor:
    """attention.cpp scaled_dot_product_attention's call of the chosen fused kernel: the same
    operator as on the GPU (its meta function with placeholder values, its values computed
    on the CPU with real ones: torchplace.sim.rules._kernels), with the same padding and masks."""
    q, k, v, mask = p.query, p.key, p.value, p.attn_mask
    # should_compute_logsumexp: the log-sum-exp is kept for backward only when it will run
    lse = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if mask is not None and mask.dtype == torch.bool:  # convert_boolean_attn_mask
        mask = torch.where(mask.logical_not(), float("-inf"), q.new_zeros(()))
    if kernel == _sdpa.FLASH:
        # pad_last_dim<8>: the head dim padded to a multiple of 8, the output sliced back;
        # the scale from the unpadded head dim
        head_dim = q.shape[-1]
        pad = -head_dim % 8
        if pad:
            q, k, v = (F.pad(t, (0, pad)) for t in (q, k, v))
        scale = head_dim**-0.5 if scale is None else scale
        out = _aten._scaled_dot_product_flash_attention(
            q, k, v, p.dropout, p.is_causal, scale=scale
        )[0]
        return out[..., :head_dim] if pad else out
    if kernel == _sdpa.CUDNN:
        return _aten._scaled_dot_product_cudnn_attention(
            q, k, v, mask, lse, p.dropout, p.is_causal, False, scale=scale
        )[0]
    if mask is not None:  # preprocess_mask: expanded to 4-D, its rows 16-aligned
        b, h, s_q, s_k = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
        mask = mask.expand(b, h, s_q, s_k)
        if s_k % 16:  # pad_bias<16>
            mask = F.pad(mask, (0, 16 - s_k % 16))[..., :s_k]
        elif any(mask.stride(i) % 16 for i in range(3)):
            mask = mask.contiguous()
    if k.shape[-3] == v.shape[-3] == 1 != q.shape[-3]:
        # implicit multi-query attention: key and value expanded, as views (pytorch#191085)
        k, v = (t.expand(*t.shape[:-3], q.shape[-3], *t.shape[-2:]) for t in (k, v))
    return _aten._scaled_dot_product_efficient_attention(
        q, k, v, mask, lse, p.dropout, p.is_causal, scale=scale
    )[0]


class SimFunctionMode(TorchFunctionMode):
    """The user-facing side of the simulation (see the module docstring)."""

    def __init__(self, state: SimState, dispatch: SimDispatchMode) -> None:
        super().__init__()
        self.state = state
        self.dispatch = dispatch
        self.local = dispatch.local
        from torch.utils._device import _device_constructors

        self.constructors = _device_constructors()
        t: Any = _T
        self._handlers: dict[Any, Callable[..., Any]] = {
            t.device.__get__: self._device,
            t.is_cuda.__get__: lambda x: self._label(x) is not None or x.is_cuda,
            t.is_cpu.__get__: lambda x: self._label(x) is None and x.is_cpu,
            t.is_meta.__get__: lambda x: self._label(x) is None and x.is_meta,
            t.get_device: lambda x: (
                self._label(x) if self._label(x) is not None else x.get_device()
            ),
            t.type: self._type,
            t.data_ptr: self._data_ptr,
            t.to: self._to_method,
            t.cuda: self._cuda_method,
            t.cpu: lambda x, memory_format=torch.preserve_format: self._move(
                x, "cpu", None, False, memory_format
            ),
            t.new_tensor: self._new_tensor,
            t.new: self._legacy_new,
            t.copy_: self._copy_method,
            t.item: self._item,
            t.tolist: self._tolist,
            t.__bool__: self._bool,
            t.__int__: lambda x: int(self._item(x)),
            t.__float__: lambda x: float(self._item(x)),
            t.__index__: lambda x: int(self._item(x)),
            t.numpy: functools.partial(self._numpy, _T.numpy),
            t.__array__: functools.partial(self._numpy, _T.__array__),
            t.__repr__: self._repr,
            t.__format__: self._format,
            t.__deepcopy__: self._deepcopy,
            torch.tensor: functools.partial(self._from_data, torch.tensor),
            torch.as_tensor: functools.partial(self._from_data, torch.as_tensor),
            torch.asarray: functools.partial(self._from_data, torch.asarray),
            _SDPA: self._sdpa,
            _DROPOUT: self._dropout,
            torch._VF._pad_packed_sequence: self._pad_packed,
            torch.ctc_loss: functools.partial(self._ctc_loss, torch.ctc_loss),
            F.ctc_loss: functools.partial(self._ctc_loss, F.ctc_loss),
        }
        for f in (t.backward, torch.autograd.backward, torch.autograd.grad):
            self._handlers[f] = functools.partial(self._backward, f)

    # --- labels ---------------------------------------------------------------------
    def _label(self, x: torch.Tensor) -> int | None:
        shown = self.local.shown
        if shown is not None and shown[0] == id(x):
            return shown[1]
        return self.state.label(x)

    def _device(self, x: torch.Tensor) -> torch.device:
        label = self._label(x)
        return torch.device("cuda", label) if label is not None else _T.device.__get__(x)

    def resolve(self, device: Any) -> int | None:
        """The simulated index a ``device=`` value names, or None for a real device."""
        if device is None or isinstance(device, torch.Tensor):
            return None
        if isinstance(device, int) and not isinstance(device, bool):
            index: int | None = device
        else:
            try:
                dev = torch.device(device)
            except (RuntimeError, TypeError):
                return None
            if dev.type != "cuda":
                return None
            index = dev.index
        self.state.init_cuda()
        if not torch.cuda._initialized:  # C++'s device_lazy_init(kCUDA): torch's own
            torch.cuda._lazy_init()
        if not self.state.devices:
            raise RuntimeError("No CUDA GPUs are available")
        if index is None:
            index = self.state.current
        if not 0 <= index < len(self.state.devices):
            raise invalid_ordinal(index, len(self.state.devices))
        return index

    @contextmanager
    def on(self, label: int | None, *, explicit: bool = False) -> Iterator[None]:
        """Run as a call on simulated device ``label``: tensors that aten factories make
        without a tensor argument (and, if ``explicit``, every output) are labelled so."""
        local, site = self.local, self.state.site
        saved = local.target, local.explicit, site.frame
        local.target, site.frame = (None if label == _HOST else label), UNKNOWN
        if explicit:
            local.explicit = label
        try:
            yield
        finally:
            local.target, local.explicit, site.frame = saved

    @contextmanager
    def _copying(self) -> Iterator[None]:
        saved, self.local.copying = self.local.copying, True
        try:
            yield
        finally:
            self.local.copying = saved

    @contextmanager
    def _quiet(self) -> Iterator[None]:
        saved, self.local.quiet = self.local.quiet, True
        try:
            yield
        finally:
            self.local.quiet = saved

    # --- the entry point ------------------------------------------------------------
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        handler = self._handlers.get(func)
        if handler is not None:
            return handler(*args, **kwargs)
        if func in _PLAIN or (type(func) is _METHOD_WRAPPER and func.__name__ in _PROPERTY_ACCESS):
            return func(*args, **kwargs)
        device = kwargs.get("device")
        if device is None and func in self.constructors:
            device = _default_device()  # torch.set_default_device("cuda") or a device context
        if device is not None:
            label = self.resolve(device)
            generator = kwargs.get("generator")
            if generator is not None:
                _check_generator(generator, label)
            if label is not None:
                kwargs = {**kwargs, "device": self.state.backing}
                with self.on(label, explicit=True):
                    return _draw(generator, lambda: func(*args, **kwargs))
            if _metadata_factory(func) and torch.device(device).type == "cpu":
                # x.new_zeros(n, device="cpu"), zeros_like(x, device="cpu"): the host's
                # tensor, whatever device x is on (only x's shape and dtype are read)
                with self.on(_HOST, explicit=True):
                    return _draw(generator, lambda: func(*args, **kwargs))
        local = self.local
        label = None
        shown = local.shown  # self._label inlined (a hot path)
        for a in args:
            if isinstance(a, (list, tuple)):
                # a list of tensors (torch.cat, torch.meshgrid, a foreach op): a call on a
                # simulated device if any of them is there, so that code above dispatch which
                # checks their devices (meshgrid's "same device") runs as on CUDA
                a = next(
                    (t for t in a if isinstance(t, torch.Tensor) and self._label(t) is not None),
                    None,
                )
            if isinstance(a, torch.Tensor):
                label = shown[1] if shown and shown[0] == id(a) else self.state.label(a)
                if label is not None:
                    break
        generator = kwargs.get("generator")
        if generator is not None:
            _check_generator(generator, label)
        if label is None and local.target is None:
            return func(*args, **kwargs)
        on_cuda: Any = None
        if label is not None:
            if func.__class__ is _PY_FUNCTION and (_deterministic() or reads_device(func)):
                # torch's Python code that reads the device (torch.unravel_index makes its
                # divisors on indices.device), or that picks its deterministic decompositions
                # by input.is_cuda / is_cpu (F.interpolate, F.pad, max_pool3d): its body must
                # see the simulated device, so it runs with this mode active
                return self._inside(func, types, args, kwargs)
            try:  # torch's code above dispatch that checks the device (cached per function)
                path = _PATH_CACHE[func]
            except (KeyError, TypeError):
                path = path_of(func)
            if path is not None and applies(path, args, kwargs, self._label):
                on_cuda = cuda_path(func, args, kwargs, self._label, path)
        # as self.on(label), inlined (a hot path): a call on simulated device `label`, or a
        # host call inside a simulated one, which makes host tensors
        site = self.state.site
        saved, local.target, frame, site.frame = local.target, label, site.frame, UNKNOWN
        try:
            if generator is not None:  # a generator of the script's own (sim/emulation/_philox.py)
                out = _draw(generator, lambda: func(*args, **kwargs))
            else:
                out = func(*args, **kwargs)
        except (RuntimeError, NotImplementedError) as e:
            if on_cuda is None:
                raise
            out = wider(func, args, kwargs, on_cuda, e)  # CUDA's path runs it; the CPU's not
        finally:
            local.target, site.frame = saved, frame
        if self.state.side_streams and label is not None and torch.is_grad_enabled():
            tag_backward_stream(out, label)  # its backward runs on the current stream
        return out

    def _inside(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """``func``'s own body, run with this mode active (its check for a torch function
        skipped once: torch.overrides.redispatch_function)."""
        redispatch = getattr(torch._C, "_skip_one_hop_torch_function", None)
        with self:
            if redispatch is None:  # torch before 2.13: a copy without the check
                return unguarded(func)(*args, **kwargs)
            return redispatch(func, types, args, kwargs)

    # --- creating and moving data -----------------------------------------------------
    def _from_data(self, factory: Any, data: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
        """``torch.tensor(data, device="cuda")``: made on the host, then copied over."""
        device = kwargs.pop("device", None)
        if device is None:
            device = _default_device()
        label = self.resolve(device)
        if label is None:
            if device is not None:
                kwargs["device"] = device
            return factory(data, *args, **kwargs)
        if isinstance(data, torch.Tensor) and self._label(data) is not None:
            if factory is torch.tensor:
                data = data.detach().clone()
            return self._move(data, device, kwargs.get("dtype"), False, None)
        requires_grad = bool(kwargs.pop("requires_grad", False))
        host = factory(data, *args, device="cpu", **kwargs)
        out = self._move(host, torch.device("cuda", label), None, False, None, copy=True)
        return out.requires_grad_(requires_grad) if requires_grad else out

    def _copy_method(self, dst: torch.Tensor, src: Any, non_blocking: bool = False) -> Any:
        """``dst.copy_(src)``; autograd's ``CopyBackwards`` gives ``src`` its gradient with
        ``grad.to(src's device)``, which cannot tell a simulated device from its backing: a
        hook moves it where ``src`` is."""
        out = _T.copy_(dst, src, non_blocking)
        node = out.grad_fn
        if isinstance(src, torch.Tensor) and src.requires_grad and node is not None:
            home = self._label(src)
            if home != self._label(dst):
                target: Any = "cpu" if home is None else torch.device("cuda", home)
                _move_gradient(node, 1, lambda g: self._move(g, target, None, False, None))
        return out

    def _legacy_new(self, x: torch.Tensor, *args: Any, device: Any = None) -> torch.Tensor:
        """``x.new(...)``, the legacy constructor (torch/csrc/utils/tensor_new.cpp
        legacy_tensor_new): x's dtype and device (or ``device=`` of x's device type); sizes
        make an uninitialised tensor, one sequence makes one from data."""
        label = self._label(x)
        if label is None:
            return _T.new(x, *args, **({} if device is None else {"device": device}))
        target = label if device is None else self.resolve(device)
        if target is None:
            raise RuntimeError(
                "legacy constructor expects device type: cuda but device type: "
                f"{torch.device(device).type} was passed"
            )
        if len(args) == 1 and not isinstance(args[0], (int, torch.Size, torch.Tensor)):
            return self._from_data(
                torch.tensor, args[0], dtype=x.dtype, device=torch.device("cuda", target)
            )
        sizes = tuple(args[0]) if len(args) == 1 and isinstance(args[0], torch.Size) else args
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in sizes):
            return _T.new(x, *args)  # a storage or a tensor: torch's own answer
        with self.on(target, explicit=True):
            return torch.empty(sizes or (0,), dtype=x.dtype, device=self.state.backing)

    def _new_tensor(self, x: torch.Tensor, data: Any, **kwargs: Any) -> torch.Tensor:
        kwargs.setdefault("dtype", x.dtype)
        kwargs.setdefault("device", self._device(x))
        return self._from_data(torch.tensor, data, **kwargs)

    def _to_method(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        # Tensor.to's overloads (torch/csrc/autograd/python_variable_methods.cpp
        # THPVariable_to) take `copy` after non_blocking: 4th after a device, 3rd after a
        # dtype or a tensor; Module.to's parser (_parse_to) has no `copy`
        copy = bool(kwargs.pop("copy", False))
        at = 2 if args and isinstance(args[0], (torch.dtype, torch.Tensor)) else 3
        if len(args) > at:
            args, copy = args[:at] + args[at + 1 :], bool(args[at])
        if args and isinstance(args[0], torch.Tensor):
            other = args[0]
            device: Any = self._device(other)
            dtype = other.dtype
            non_blocking = bool(args[1]) if len(args) > 1 else kwargs.get("non_blocking", False)
            fmt = torch.preserve_format
        else:
            if args and isinstance(args[0], int) and not isinstance(args[0], bool):
                args = (torch.device("cuda", args[0]), *args[1:])
            if type(kwargs.get("device")) is int:  # x.to(device=0), as transformers loads
                kwargs["device"] = torch.device("cuda", kwargs["device"])
            device, dtype, non_blocking, fmt = torch._C._nn._parse_to(*args, **kwargs)
        return self._move(x, device, dtype, bool(non_blocking), fmt, copy=copy)

    def _cuda_method(
        self,
        x: torch.Tensor,
        device: Any = None,
        non_blocking: bool = False,
        memory_format: torch.memory_format = torch.preserve_format,
    ) -> torch.Tensor:
        target = torch.device("cuda") if device is None else device
        if isinstance(target, int):
            target = torch.device("cuda", target)
        return self._move(x, target, None, non_blocking, memory_format)

    def _move(
        self,
        x: torch.Tensor,
        device: Any,
        dtype: torch.dtype | None,
        non_blocking: bool,
        fmt: torch.memory_format | None,
        *,
        copy: bool = False,
    ) -> torch.Tensor:
        state = self.state
        src = self._label(x)
        dst = self.resolve(device) if device is not None else src
        fmt = fmt or torch.preserve_format
        out_dtype = dtype or x.dtype
        if device is None or (dst is not None and dst == src) or (dst is None and src is None):
            if src is None:
                return x.to(
                    device=device, dtype=dtype, non_blocking=non_blocking, copy=copy,
                    memory_format=fmt,
                )  # fmt: skip
            with self.on(src):
                return x.to(dtype=out_dtype, copy=copy, memory_format=fmt)
        nbytes = x.numel() * out_dtype.itemsize
        if dst is not None and x.layout != torch.strided:
            raise _not_simulated_layout(x, dst, "to")
        if dst is not None and src is None:  # host -> simulated GPU
            if x.is_meta:
                raise NotImplementedError(
                    "Cannot copy out of meta tensor; no data! Please consider using "
                    "torch.nn.Module.to_empty() instead of torch.nn.Module.to() when moving "
                    "module from meta to a different device."
                )
            _host_to_device(state, x, dst, nbytes, non_blocking)
            if isinstance(x, torch.nn.Parameter):
                state.host_weights(nbytes)
            target = dst

            def make_h2d() -> torch.Tensor:
                with self.on(target, explicit=True), self._copying():
                    if state.real:
                        return _aten._to_copy(x, dtype=out_dtype, memory_format=fmt)
                    if state.host_backed:  # placeholders since a switch: never written
                        return torch.empty_like(
                            x, dtype=out_dtype, device=state.backing, memory_format=fmt
                        )
                    return _aten._to_copy(x, dtype=out_dtype, device=_META, memory_format=fmt)

            def back_h2d(g: torch.Tensor) -> torch.Tensor:
                return self._move(g, "cpu", None, False, None)

            return self._apply(x, make_h2d, back_h2d)
        if dst is None:  # simulated GPU -> host (or the meta device)
            target_dev = torch.device(device)
            if target_dev.type == "meta":
                return torch.empty_like(x, dtype=out_dtype, device=_META, memory_format=fmt)
            assert src is not None  # not both on the host: handled above
            source = src
            state.transfer("d2h", nbytes, source)
            if not non_blocking:
                state.record_sync("to cpu")

            def make_d2h() -> torch.Tensor:
                if not state.real:
                    out = torch.zeros(x.shape, dtype=out_dtype, device=target_dev)
                else:
                    with torch._C._DisableTorchDispatch():
                        out = _aten._to_copy(x, dtype=out_dtype, memory_format=fmt)
                if non_blocking:  # _to_copy allocates its host result pinned (pin_out:
                    # aten/src/ATen/native/TensorConversions.cpp), from the host allocator
                    out.data = state.pinned.pin(out.detach())
                    state.pinned.copied(out, source, True)
                return out

            def back_d2h(g: torch.Tensor) -> torch.Tensor:
                return self._move(g, torch.device("cuda", source), None, False, None)

            return self._apply(x, make_d2h, back_d2h)
        assert src is not None and dst is not None  # the other cases returned above
        source, target = src, dst
        state.transfer("d2d", nbytes, source)

        def make_d2d() -> torch.Tensor:
            with self.on(target, explicit=True), self._copying():
                return _aten._to_copy(x, dtype=out_dtype, memory_format=fmt)

        def back_d2d(g: torch.Tensor) -> torch.Tensor:
            return self._move(g, torch.device("cuda", source), None, False, None)

        return self._apply(x, make_d2d, back_d2d)

    @staticmethod
    def _apply(
        x: torch.Tensor, make: Callable[[], torch.Tensor], back: Callable[..., torch.Tensor]
    ) -> torch.Tensor:
        """``make()``'s move of ``x``; where autograd records it, the gradient moves back
        with ``back``.

        ``make`` calls ``aten._to_copy``, so autograd records the node CUDA's move records
        (``ToCopyBackward0``). That node's backward (``grad.to(x's device and dtype)``)
        cannot tell a simulated device from its backing, so a hook moves its result where
        ``x`` is (accounted as a transfer). Placeholder values cannot be copied to the
        host: such a move is ``_Mover``.
        """
        if not (x.requires_grad and torch.is_grad_enabled()):
            with torch.no_grad():
                return make()
        out = make()
        if out.grad_fn is None:  # placeholders to the host
            return _Mover.apply(x, make, back)
        _move_gradient(out.grad_fn, 0, back)
        return out

    # --- values that need the GPU's data -----------------------------------------------
    def _read(self, x: torch.Tensor, kind: str) -> None:
        self.state.record_sync(kind)
        self.state.transfer("d2h", x.numel() * x.element_size(), self._label(x))

    def _host(self, x: torch.Tensor) -> torch.Tensor:
        """The host copy of a simulated tensor's data (zeros with placeholder values)."""
        if not self.state.real:
            return torch.zeros(x.shape, dtype=x.dtype, device="cpu")
        with torch._C._DisableTorchDispatch():
            return x.detach().clone()

    def _item(self, x: torch.Tensor) -> Any:
        if self._label(x) is None:
            if type(x) is _T and torch._C._len_torch_dispatch_stack() == 1:
                # A host scalar (an optimizer's step count) and no dispatch mode but this
                # one, which has nothing to do for it: skip its op (60 a step for AdamW).
                with torch._C._DisableTorchDispatch():
                    return x.item()
            return x.item()
        if x.numel() != 1:
            raise RuntimeError(f"a Tensor with {x.numel()} elements cannot be converted to Scalar")
        self._read(x, "item")
        with self._quiet():
            return x.item()

    def _tolist(self, x: torch.Tensor) -> Any:
        if self._label(x) is None:
            return x.tolist()
        self._read(x, "tolist")
        return self._host(x).tolist()

    def _bool(self, x: torch.Tensor) -> bool:
        if self._label(x) is None:
            return bool(x)
        if x.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        self._read(x, "bool")
        with self._quiet():
            return bool(x.item())

    def _numpy(self, real: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        label = self._label(x)
        if label is None:
            return real(x, *args, **kwargs)
        raise TypeError(
            f"can't convert cuda:{label} device type tensor to numpy. Use Tensor.cpu() to "
            "copy the tensor to host memory first."
        )

    def _repr(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> str:
        label = self._label(x)
        if label is None:
            return _T.__repr__(x, *args, **kwargs)
        self._read(x, "print")
        shown = (
            x if self.state.real else torch.zeros((), dtype=x.dtype, device="cpu").expand(x.shape)
        )
        if not self.state.real and x.requires_grad:
            shown = shown.clone().requires_grad_(True)
        saved = self.local.shown
        self.local.shown = (id(shown), label)
        try:
            with self:  # torch's own printer, asking this mode for the device
                text: str = torch._tensor_str._str(shown, *args, **kwargs)
        finally:
            self.local.shown = saved
        if x.grad_fn is not None and shown is not x:
            text = text.replace(", requires_grad=True)", f", grad_fn=<{type(x.grad_fn).__name__}>)")
        return text

    def _format(self, x: torch.Tensor, spec: str) -> str:
        if self._label(x) is None:
            return _T.__format__(x, spec)
        if x.dim() == 0:
            return format(self._item(x), spec)
        if spec:
            raise TypeError("unsupported format string passed to Tensor.__format__")
        return self._repr(x)

    def _type(self, x: torch.Tensor, dtype: Any = None, non_blocking: bool = False) -> Any:
        label = self._label(x)
        if dtype is None:
            return (
                _T.type(x)
                if label is None
                else _device_rules.tensor_type(x, lambda t: f"cuda:{label}")
            )
        if isinstance(dtype, torch.dtype):
            if label is None:
                return _T.type(x, dtype, non_blocking)
            return self._move(x, None, dtype, non_blocking, None)
        # a legacy type or its name: "torch.cuda.FloatTensor" is a CUDA tensor of float32
        name = dtype if isinstance(dtype, str) else f"{dtype.__module__}.{dtype.__name__}"
        to_cuda = name.startswith("torch.cuda.")
        if label is None and not to_cuda:
            return _T.type(x, getattr(dtype, "real", dtype), non_blocking)
        target_dtype = _device_rules.LEGACY_TYPES.get(name.rsplit(".", 1)[-1])
        if target_dtype is None or name.count(".") != (2 if to_cuda else 1):
            raise ValueError(f"invalid type: '{name}'")
        if not to_cuda:
            return self._move(x, "cpu", target_dtype, non_blocking, None)
        index = label if label is not None else self.state.current
        return self._move(x, torch.device("cuda", index), target_dtype, non_blocking, None)

    def _data_ptr(self, x: torch.Tensor) -> int:
        if self._label(x) is None:
            return _T.data_ptr(x)
        base = self.state.address(x.untyped_storage()) or 0
        return base + int(x.storage_offset()) * x.element_size()

    def _deepcopy(self, x: torch.Tensor, memo: dict[int, Any]) -> torch.Tensor:
        label = self._label(x)
        if label is None:
            return _T.__deepcopy__(x, memo)
        if id(x) in memo:
            return memo[id(x)]
        with torch.no_grad(), self.on(label):
            new = x.clone()
        new.requires_grad_(x.requires_grad)
        if x.grad is not None:
            new.grad = self._deepcopy(x.grad, memo)
        memo[id(x)] = new
        return new

    def _pad_packed(self, data: torch.Tensor, batch_sizes: torch.Tensor, *args: Any) -> Any:
        """PackedSequence.cpp _pad_packed_sequence: the padded data on data's device, the
        lengths on the CPU (made from the CPU ``batch_sizes``, which must be there)."""
        real = torch._VF._pad_packed_sequence
        label = self._label(data)
        on_gpu = self._label(batch_sizes)
        _device_rules.check_lengths(
            batch_sizes, lambda t: str(t.device) if on_gpu is None else f"cuda:{on_gpu}"
        )
        if label is None:
            return real(data, batch_sizes, *args)
        with self.on(label):
            padded, _ = real(data, batch_sizes, *args)
        # batch element b is as long as the number of steps whose batch is larger than b
        steps = torch.arange(int(batch_sizes[0])).unsqueeze(1)
        return padded, (batch_sizes.unsqueeze(0) > steps).sum(1)

    def _ctc_loss(self, real: Any, *args: Any, **kwargs: Any) -> Any:
        """``ctc_loss`` with tensor lengths on its fast path, the one CUDA takes: the lengths
        read on the host (``input_lengths.to(Device(at::kCPU), at::kLong)``) and passed on as
        integer lists (aten/src/ATen/native/LossCTC.cpp). Under any dispatch mode, as this
        simulation is, torch takes the composite-compliant path instead, which divides by the
        lengths where they are and refuses host lengths beside GPU losses."""
        call = list(args)
        where = ((2, "input_lengths"), (3, "target_lengths"))
        lengths = [call[i] if i < len(call) else kwargs.get(name) for i, name in where]
        if all(
            isinstance(t, torch.Tensor)
            and not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)
            for t in lengths
        ):  # (else the fast path's own check: "input_lengths must be integral")
            for (i, name), t in zip(where, lengths, strict=True):
                read = t.tolist()  # type: ignore[union-attr]  # (a tensor: checked above)
                if i < len(call):
                    call[i] = read
                else:
                    kwargs[name] = read
        with self.on(self._label(call[0])):  # (its factories take log_probs' options)
            return real(*call, **kwargs)

    # --- kernels the target GPU would pick ---------------------------------------------
    def _sdpa(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> torch.Tensor:
        label = next((lb for t in (query, key, value) if (lb := self._label(t)) is not None), None)
        if label is None:
            return _SDPA(
                query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                enable_gqa=enable_gqa,
            )  # fmt: skip
        # CUDA autocast's kernel for the operator casts first (aten/src/ATen/autocast_mode.cpp)
        query, key, value, attn_mask = _autocast.sdpa_arguments(query, key, value, attn_mask)
        params = _sdpa.Params(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
        _sdpa.validate(params, lambda t: str(self._device(t)), scale)
        spec = self.state.devices[label].spec
        self.state.decisions.add("the attention kernel (it depends on the GPU)")
        kernel = _sdpa.select(params, _sdpa_gpu(spec))
        self.state.note(f"scaled_dot_product_attention: {kernel} kernel (as on the GPU)")
        if kernel != _sdpa.MATH and self.state.real:
            self.state.note(
                f"scaled_dot_product_attention: the {kernel} kernel's values computed on the "
                "CPU (its flash kernel, or the formula with dropout); rounding differs"
            )
        with _autocast.excluded(), self.on(label):
            if kernel == _sdpa.MATH:
                # the CPU would pick its own flash kernel for tensors with real values
                with sdpa_kernel([SDPBackend.MATH]):
                    return _SDPA(
                        query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                        enable_gqa=enable_gqa,
                    )  # fmt: skip
            return _fused_sdpa(kernel, params, scale)

    def _dropout(
        self, input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
    ) -> torch.Tensor:
        """CUDA's fused dropout keeps a bool mask; the CPU path (which simulated tensors
        would take) keeps one in the input's dtype (aten/src/ATen/native/Dropout.cpp)."""
        label = self._label(input)
        if label is None or inplace or not training or not 0 < p < 1 or input.numel() == 0:
            return _DROPOUT(input, p, training, inplace)
        with self.on(label):
            return torch.native_dropout(input, p, True)[0]

    def engine(self, run: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap ``torch.autograd``'s call into the autograd engine so that the Python code
        that runs during backward — custom autograd Functions, activation checkpointing's
        recompute, DataParallel's scatter and gather — sees the simulated devices: the
        backward handler runs with this mode popped, as every handler does."""
        return self.reentrant(run)

    def reentrant(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """``func``, seeing this mode even where it is called from code that runs with the
        mode popped: a torch function being handled (``F.multi_head_attention_forward``
        calls ``F.scaled_dot_product_attention`` and ``F.dropout``), or the autograd engine.
        Installed in place of ``func`` for the simulation; handlers answer both names."""

        def call(*args: Any, **kwargs: Any) -> Any:
            if self in torch.overrides._get_current_function_mode_stack():
                return func(*args, **kwargs)
            with self:
                return func(*args, **kwargs)

        functools.update_wrapper(call, func)
        call._torchplace_unique = True  # type: ignore[attr-defined]
        if func in self._handlers:
            self._handlers[call] = self._handlers[func]
        return call

    def _backward(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        label = None
        for t in tensors_in((args, kwargs)):
            label = self._label(t)
            if label is not None:
                break
        saved = self.state.phase
        self.state.phase = "backward"
        try:
            with self.on(label):
                return func(*args, **kwargs)
        finally:
            self.state.phase = saved
