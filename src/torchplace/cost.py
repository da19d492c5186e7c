"""The cost model: how long an operation takes on a device.

On a catalog GPU (:meth:`Peaks.from_spec`) every aten operation is priced by the step-time
model of :mod:`torchplace.timemodel`: by its kernel class (matrix product, convolution,
attention, memory-bound), from its *signature* (the shapes that decide its time), plus the
host's time to issue it; :class:`StepEstimate` queues the kernels behind the host as eager
PyTorch runs them. docs/time-model.md describes every term and its source. Without a time
model (the CPU's measured peaks, peaks given by hand) an operation is charged the roofline,
``max(FLOPs / peak FLOP/s for its dtype, bytes / memory bandwidth) + launch overhead``.
Either way the term that dominates is its *bound* (``"compute"``, ``"memory"`` or
``"launch"``). FLOPs come from PyTorch's own formulas
(``torch.utils.flop_counter.flop_registry``, the rules ``FlopCounterMode`` uses: matmul,
convolution, attention); every other operation does no counted FLOPs and is bound by
memory or launch. Bytes are what the operation reads (each input's distinct elements)
plus what it writes (each output), times the element size. Views and metadata
operations (``view``, ``t``, ``expand``, ``as_strided``, ``detach``, ``empty`` ...) run
no kernel and cost nothing (bound ``"none"``).

Only shapes, strides and dtypes are read, never data, so the arguments may be meta
tensors or fake tensors: the simulator calls :func:`op_cost` from a
``TorchDispatchMode`` for every operation on a simulated device, and :func:`estimate`
prices a whole forward and backward pass built on ``torch.device("meta")``.

A roofline is a lower bound: real kernels rarely reach the peak, so measured times are
longer than predicted (``benchmarks/validate_cost_model.py`` says by how much on this CPU;
``benchmarks/timing_accuracy.py`` checks the GPU model against published measurements).

Examples:
    >>> import torch
    >>> from torchplace.cost import Peaks, op_cost
    >>> peaks = Peaks("toy", flops_per_s={"fp32": 1e12}, bandwidth_bytes_per_s=1e11)
    >>> a, b = torch.empty(1024, 1024, device="meta"), torch.empty(1024, 1024, device="meta")
    >>> c = op_cost(torch.ops.aten.mm.default, (a, b), {}, a @ b, peaks)
    >>> c.flops, c.bytes, c.bound  # 2·1024³ FLOPs; reads a and b, writes the result
    (2147483648.0, 12582912, 'compute')
    >>> op_cost(torch.ops.aten.t.default, (a,), {}, a.t(), peaks).seconds
    0.0
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry, shape_wrapper
from torch.utils.module_tracker import ModuleTracker

from torchplace.timemodel import kernels as _kernels

if TYPE_CHECKING:
    from torchplace.catalog import GPUSpec
    from torchplace.timemodel import DeviceModel

R = TypeVar("R")

__all__ = [
    "GPU_LAUNCH_SECONDS",
    "PRECISIONS",
    "TOP_LEVEL",
    "Bound",
    "OpCost",
    "Peaks",
    "StepEstimate",
    "Totals",
    "estimate",
    "op_cost",
    "precision_of",
    "runs_kernel",
    "transfer_seconds",
]

Bound = Literal["compute", "memory", "launch", "communication", "none"]

#: Per-kernel overhead charged to every GPU operation, in seconds. Eager PyTorch spends
#: a few microseconds of CPU time per operation (Python, the dispatcher, the CUDA
#: launch); 5 µs is the usual figure for a current host. A GPU kernel shorter than this
#: leaves the GPU waiting for the CPU: the step is then bound by launch, not the GPU.
GPU_LAUNCH_SECONDS = 5e-6

#: Precision keys used for peak FLOP/s, as in the GPU catalog.
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")

_aten = torch.ops.aten

# Operations that run no kernel although their schema does not mark them as views.
_NO_KERNEL = {
    _aten._unsafe_view,
    _aten.empty,
    _aten.empty_like,
    _aten.empty_strided,
    _aten.sym_size,
    _aten.sym_stride,
    _aten.sym_numel,
    _aten.sym_storage_offset,
    _aten.is_same_size,
    _aten.lift_fresh_copy,
    _aten.set_,
}

# CPU attention kernels that PyTorch's FLOP registry does not list, priced by the
# registry's formula for the CUDA kernel with the same arguments and the same math.
_FLOP_ALIASES = {
    _aten._scaled_dot_product_flash_attention_for_cpu: (_aten._scaled_dot_product_flash_attention),
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: (
        _aten._scaled_dot_product_flash_attention_backward
    ),
}

# In-place operations that overwrite their first argument without reading it.
_WRITE_ONLY = {
    _aten.copy_,
    _aten.fill_,
    _aten.zero_,
    _aten.normal_,
    _aten.uniform_,
    _aten.bernoulli_,
    _aten.random_,
    _aten.exponential_,
}


def precision_of(dtype: torch.dtype, *, tf32: bool = False) -> str:
    """The precision key (``"fp32"``, ``"bf16"``, ...) whose peak prices ``dtype``.

    Args:
        dtype: the dtype an operation computes in.
        tf32: whether float32 matrix products run on TF32 tensor cores
            (``torch.backends.cuda.matmul.allow_tf32``).

    Returns:
        A key of :data:`PRECISIONS`. Integer, bool and complex dtypes are priced at the
        fp32 (or fp64) rate: the catalog has no separate figure for them.

    Examples:
        >>> import torch
        >>> precision_of(torch.bfloat16), precision_of(torch.float32, tf32=True)
        ('bf16', 'tf32')
    """
    key = _PRECISION_OF.get((dtype, tf32))
    if key is None:
        key = _PRECISION_OF[dtype, tf32] = _precision_of(dtype, tf32)
    return key


_PRECISION_OF: dict[tuple[torch.dtype, bool], str] = {}  # every priced operation asks


def _precision_of(dtype: torch.dtype, tf32: bool) -> str:
    if dtype in (torch.float64, torch.complex128):
        return "fp64"
    if dtype == torch.bfloat16:
        return "bf16"
    if dtype == torch.float16:
        return "fp16"
    if "float8" in str(dtype):
        return "fp8"
    return "tf32" if tf32 and dtype == torch.float32 else "fp32"


@dataclass(frozen=True)
class Peaks:
    """What a device can do at best: the roofline's ceilings.

    Attributes:
        name: the device, for people ("NVIDIA H100 80GB HBM3", "cpu").
        flops_per_s: dense peak FLOP/s per precision key (see :data:`PRECISIONS`).
            ``"fp32"`` is required: it prices every dtype without its own figure.
        bandwidth_bytes_per_s: memory bandwidth.
        host_bandwidth_bytes_per_s: host link bandwidth per direction (``None`` for the
            CPU itself, or where unknown).
        launch_seconds: overhead charged to every operation that runs a kernel
            (:data:`GPU_LAUNCH_SECONDS` for GPUs; measured for the CPU).
        measured: ``True`` when the figures were measured on this machine, ``False``
            when they come from a datasheet.
        source: where the figures come from, for people.
        memory_bytes: the memory that tensors can use, or ``None`` where unknown.
        timing: the GPU's kernel-time model (:class:`torchplace.timemodel.DeviceModel`):
            set by :meth:`from_spec`, it prices each kernel by its class (matrix product,
            convolution, attention, memory-bound) and charges the host's time per
            operation; without it (the CPU's measured peaks, peaks given by hand) every
            kernel is priced by the roofline alone.

    Examples:
        >>> Peaks("toy", flops_per_s={"fp32": 1e12}, bandwidth_bytes_per_s=1e11).measured
        False
    """

    name: str
    flops_per_s: Mapping[str, float]
    bandwidth_bytes_per_s: float
    host_bandwidth_bytes_per_s: float | None = None
    launch_seconds: float = GPU_LAUNCH_SECONDS
    measured: bool = False
    source: str = "given"
    memory_bytes: int | None = None
    timing: DeviceModel | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.flops_per_s) - set(PRECISIONS))
        if unknown:
            raise ValueError(
                f"Peaks for {self.name!r} name unknown precisions {unknown}; "
                f"use keys among {list(PRECISIONS)}."
            )
        if "fp32" not in self.flops_per_s:
            raise ValueError(
                f"Peaks for {self.name!r} have no fp32 peak FLOP/s (got "
                f"{sorted(self.flops_per_s)}); give one: it prices every dtype without "
                "a figure of its own."
            )
        bad = {k: v for k, v in self.flops_per_s.items() if not v > 0}
        if bad or not self.bandwidth_bytes_per_s > 0:
            raise ValueError(
                f"Peaks for {self.name!r} must be positive: FLOP/s {dict(self.flops_per_s)}, "
                f"bandwidth {self.bandwidth_bytes_per_s} bytes/s."
            )
        if self.launch_seconds < 0:
            raise ValueError(
                f"launch_seconds must be >= 0, got {self.launch_seconds} for {self.name!r}."
            )

    @classmethod
    def from_spec(cls, spec: GPUSpec, *, launch_seconds: float | None = None) -> Peaks:
        """The datasheet peaks of a GPU from the catalog, with its kernel-time model.

        Args:
            spec: a catalog row (``torchplace.catalog.lookup("H100")``).
            launch_seconds: the GPU-side overhead of a kernel; the time model's
                (``kernel.overhead_seconds``, torchplace/data/timemodel.toml) by default.

        Raises:
            ValueError: the catalog row has no fp32 peak FLOP/s, so no time can be
                estimated for it.
        """
        flops = {k: float(v) for k, v in spec.peak_flops.items() if k in PRECISIONS}
        if "fp32" not in flops:
            raise ValueError(
                f"The catalog has no fp32 peak FLOP/s for {spec.name}, so torchplace cannot "
                "estimate times on it; pick a GPU whose catalog row has one."
            )
        from torchplace.timemodel import DeviceModel

        timing = DeviceModel.from_spec(spec)
        if launch_seconds is None:
            launch_seconds = timing.kernel_overhead
        memory = spec.torch_total_bytes or spec.memory_bytes
        return cls(
            name=spec.name,
            flops_per_s=flops,
            bandwidth_bytes_per_s=float(spec.bandwidth_bytes_per_s),
            host_bandwidth_bytes_per_s=(
                float(spec.host_bandwidth_bytes_per_s) if spec.host_bandwidth_bytes_per_s else None
            ),
            launch_seconds=launch_seconds,
            measured=False,
            source=f"catalog ({spec.key}, datasheet)",
            memory_bytes=int(memory) if memory else None,
            timing=timing,
        )

    def flops_for(self, dtype: torch.dtype, *, tf32: bool = False) -> float:
        """Peak FLOP/s for ``dtype``, falling back to fp32 where there is no own figure.

        Examples:
            >>> import torch
            >>> p = Peaks("toy", flops_per_s={"fp32": 1e12, "bf16": 4e12},
            ...           bandwidth_bytes_per_s=1e11)
            >>> p.flops_for(torch.bfloat16), p.flops_for(torch.float16)
            (4000000000000.0, 1000000000000.0)
        """
        return self.flops_at(precision_of(dtype, tf32=tf32))

    def flops_at(self, precision: str) -> float:
        """Peak FLOP/s for a precision key (see :data:`PRECISIONS`), fp32's where there is
        no own figure."""
        return float(self.flops_per_s.get(precision, self.flops_per_s["fp32"]))


class OpCost(NamedTuple):
    """The roofline price of one operation (a named tuple: the simulator makes one for
    every operation, and a frozen dataclass costs five times as much to build).

    Attributes:
        op: the aten operation, e.g. ``"aten.mm"``.
        flops: floating-point operations (PyTorch's counting rules).
        bytes: bytes read plus bytes written.
        seconds: the kernel's time on the device: the kernel-time model's where the peaks
            have one (:attr:`Peaks.timing`), else ``max(flops / peak, bytes / bandwidth) +
            launch``; 0 for views.
        bound: which term dominates; ``"none"`` for operations that run no kernel.
        precision: the precision key whose peak priced the FLOPs (see :data:`PRECISIONS`).
        host: CPU seconds the host spends issuing it (eager PyTorch's per-operation cost;
            0 without a kernel-time model).
        signature: the kernel's signature (:mod:`torchplace.timemodel.kernels`), which
            re-prices it on another GPU; ``None`` without a kernel-time model.
    """

    op: str
    flops: float
    bytes: int
    seconds: float
    bound: Bound
    precision: str = "fp32"
    host: float = 0.0
    signature: tuple[Any, ...] | None = None


def tensors_in(tree: Any) -> list[torch.Tensor]:
    """The tensors in an aten operation's arguments or outputs, in order.

    aten passes tensors alone or in lists, tuples (return types included) and the kwargs
    dict, so this walk finds them all; it costs a tenth of a pytree flatten, which the
    simulator would otherwise pay several times on every operation. (No self-referencing
    closure: that cycle would keep the tensors alive until the garbage collector runs.)
    """
    if isinstance(tree, torch.Tensor):
        return [tree]
    found: list[torch.Tensor] = []
    if isinstance(tree, (list, tuple)):
        _collect(tree, found)
    elif isinstance(tree, dict):
        _collect(tree.values(), found)
    return found


def call_tensors(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[torch.Tensor]:
    """``tensors_in((args, kwargs))`` in one or two calls instead of three: the tensors
    of an aten call, positional arguments first."""
    found: list[torch.Tensor] = []
    _collect(args, found)
    if kwargs:
        _collect(kwargs.values(), found)
    return found


def _collect(items: Any, found: list[torch.Tensor]) -> None:
    """The tensors of a list, tuple or dict's values (recursing only into containers: a
    call per element was most of the walk's cost)."""
    for x in items:
        if isinstance(x, torch.Tensor):
            found.append(x)
        elif isinstance(x, (list, tuple)):
            _collect(x, found)
        elif isinstance(x, dict):
            _collect(x.values(), found)


def _footprint_bytes(t: torch.Tensor) -> int:
    """Bytes an operation reads from ``t``: broadcast (stride-0) dimensions count once."""
    if t.layout != torch.strided:
        return int(t.numel()) * t.element_size()
    stride = t.stride()
    if 0 not in stride:
        return int(t.nbytes)
    elements = math.prod(int(n) for n, s in zip(t.shape, stride, strict=True) if int(s) != 0)
    return elements * t.element_size() if t.numel() else 0


def _traffic(
    write_only: bool, inputs: list[torch.Tensor], outputs: list[torch.Tensor]
) -> tuple[int, torch.dtype]:
    """The bytes an operation moves (each distinct input read once, not an output it only
    overwrites; each distinct output written once) and the dtype it computes in (the first
    floating-point tensor's, float32 if none is). One pass, the fewest calls into torch: the
    simulator prices every kernel, and in a training step each call runs with the CPU's
    caches cold from the kernel before."""
    seen = {id(t) for t in outputs} if write_only else set()
    read = 0
    dtype = None
    for t in inputs:
        if dtype is None and t.is_floating_point():
            dtype = t.dtype
        key = id(t)
        if key in seen:
            continue
        seen.add(key)
        try:
            broadcast = 0 in t.stride()
        except RuntimeError:  # a layout without strides
            broadcast = True
        read += _footprint_bytes(t) if broadcast else t.nbytes
    if dtype is None:
        dtype = next((t.dtype for t in outputs if t.is_floating_point()), torch.float32)
    written = outputs if len(outputs) == 1 else {id(t): t for t in outputs}.values()
    for t in written:
        try:
            read += t.nbytes
        except RuntimeError:  # sparse: its dense size
            read += int(t.numel()) * t.element_size()
    return read, dtype


# Attention kernels called with (batch, seq, heads, dim) tensors, whose FLOP formulas in
# torch.utils.flop_counter read a dense call's shapes as (batch, heads, seq, dim) before
# torch 2.14 (2.14 transposes them for _flash_attention_forward itself)
_SEQ_MAJOR = {_aten._flash_attention_forward, _aten._efficient_attention_forward}


def _heads_major(count: Callable[..., Any]) -> Callable[..., Any]:
    """``count`` given a dense call's query, key and value as (batch, heads, seq, dim),
    unless it already reads them so (tried once on a call whose sequence lengths differ:
    one query, two keys, in one head)."""
    q, kv = torch.empty(1, 1, 1, 8, device="meta"), torch.empty(1, 2, 1, 8, device="meta")
    right = 2 * (2 * 1 * 8 * 2)  # q @ k^T, then the weights @ v: 2·m·n·k each
    try:
        if count(q, kv, kv, None, None, None, None, None, out_val=None) == right:
            return count
    except Exception:  # a formula that reads the sequence as heads: 1 head, 2 heads
        pass

    def counted(query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        if query.dim() == 4:
            query, key, value = (t.transpose(1, 2) for t in (query, key, value))
        return count(query, key, value, *args, **kwargs)

    return counted


# Matrix products: the argument that is the first matrix (its last dimension is k).
_GEMM_FIRST_MATRIX = {_aten.mm: 0, _aten.bmm: 0, _aten.addmm: 1, _aten.baddbmm: 1}
# The wrapper torch.utils.flop_counter puts around a formula that takes shapes.
_SHAPE_WRAPPER_CODE = shape_wrapper(lambda: 0).__code__


@dataclass(frozen=True)
class _OpInfo:
    """What pricing needs to know of an aten overload, looked up once per overload (an
    ``OpOverloadPacket`` hashes in Python: a dict lookup with it costs a call)."""

    name: str
    no_kernel: bool  # a view or metadata operation
    gemm: int | None  # a matrix product: its first matrix's position
    count: Callable[..., Any] | None  # its FLOP formula
    on_shapes: bool  # the formula takes shapes (flop_counter's shape_wrapper removed)
    write_only: bool  # it overwrites its first argument without reading it
    func: Any  # the overload (_OP_INFO is keyed by its id)
    kclass: str  # its kernel class (torchplace.timemodel.kernels.kernel_class)
    plain_memory: bool  # a memory-bound kernel whose signature is its bytes alone

    @staticmethod
    def of(func: Any) -> _OpInfo:
        packet = getattr(func, "overloadpacket", func)
        count = flop_registry.get(_FLOP_ALIASES.get(packet, packet))
        if count is not None and packet in _SEQ_MAJOR:
            count = _heads_major(count)
        on_shapes = count is not None and count.__code__ is _SHAPE_WRAPPER_CODE
        return _OpInfo(
            str(packet), getattr(func, "is_view", False) or packet in _NO_KERNEL,
            _GEMM_FIRST_MATRIX.get(packet), count.__wrapped__ if on_shapes else count,  # type: ignore[union-attr]
            on_shapes, packet in _WRITE_ONLY, func, _kernels.kernel_class(func),
            _kernels.plain_memory(func),
        )  # fmt: skip


_OP_INFO: dict[int, _OpInfo] = {}


def _info(func: Any) -> _OpInfo:
    info = _OP_INFO.get(id(func))
    if info is None or info.func is not func:
        info = _OP_INFO[id(func)] = _OpInfo.of(func)
    return info


def runs_kernel(func: Any) -> bool:
    """Whether an aten overload runs a kernel: :func:`op_cost` prices views and metadata
    operations (``view``, ``t``, ``detach``, ``empty`` ...) at zero."""
    return not _info(func).no_kernel


def _shapes(x: Any) -> Any:
    """``x`` with each tensor replaced by its shape (lists and tuples rebuilt as such), as
    the FLOP formulas take their arguments."""
    if isinstance(x, torch.Tensor):
        return x.shape
    if isinstance(x, (list, tuple)):
        return [_shapes(y) for y in x] if isinstance(x, list) else tuple(_shapes(y) for y in x)
    if isinstance(x, dict):
        return {k: _shapes(v) for k, v in x.items()}
    return x


_SHAPE = operator.attrgetter("shape")
#: FLOPs from a formula on shapes, by operation and shapes: a training loop repeats the same
#: few such operations (attention, convolution) and a formula takes 100-300 µs to evaluate.
_FLOPS: dict[tuple[Any, ...], float] = {}


def _formula_flops(func: Any, info: _OpInfo, args: Any, kwargs: Any, out: Any) -> float:
    def evaluate() -> float:
        assert info.count is not None
        shaped_args, shaped_kwargs = _shapes(args), _shapes(kwargs)
        return float(info.count(*shaped_args, **shaped_kwargs, out_shape=_shapes(out)))

    key = (id(func), arguments_key(args), arguments_key(kwargs), arguments_key(out))
    return remembered(_FLOPS, key, 4096, evaluate)


def remembered(table: dict[Any, R], key: Any, bound: int, compute: Callable[[], R]) -> R:
    """``table[key]``, from ``compute()`` the first time. A key that does not hash is computed
    every time; a table that reaches ``bound`` entries (shapes that keep changing, as in
    generation) starts again empty. The FLOP formulas' cache and the simulator's attention
    layouts use it."""
    try:
        found = table.get(key)
    except TypeError:  # an argument that does not hash
        return compute()
    if found is None:
        found = compute()
        if len(table) >= bound:
            table.clear()
        table[key] = found
    return found


def arguments_key(x: Any, of_tensor: Callable[[torch.Tensor], Any] = _SHAPE) -> Any:
    """``x`` (an operation's arguments or outputs) as a cache key: ``of_tensor(t)`` (the
    shape) in place of each tensor, tuples in place of lists and dicts. The key of
    :func:`_formula_flops`, made without building :func:`_shapes` first, and of the
    simulator's attention layouts (which pass shape, strides and dtype)."""
    if isinstance(x, torch.Tensor):
        return of_tensor(x)
    if isinstance(x, list):
        return tuple(arguments_key(y, of_tensor) for y in x)
    if isinstance(x, dict):
        return tuple((k, arguments_key(v, of_tensor)) for k, v in x.items())
    if type(x) is tuple:
        return tuple(arguments_key(y, of_tensor) for y in x)
    return x


def op_cost(
    func: Any,
    args: Any,
    kwargs: Mapping[str, Any] | None,
    out: Any,
    peaks: Peaks,
    *,
    tf32: bool = False,
    inputs: list[torch.Tensor] | None = None,
    outputs: list[torch.Tensor] | None = None,
) -> OpCost:
    """Price one aten operation on the device described by ``peaks``.

    Args:
        func: the aten overload (``torch.ops.aten.mm.default``), as a
            ``TorchDispatchMode`` receives it.
        args: its positional arguments (real, meta or fake tensors; only shapes,
            strides and dtypes are read).
        kwargs: its keyword arguments (``None`` or empty when there are none).
        out: what it returned.
        peaks: the device.
        tf32: whether float32 matrix products run on TF32 tensor cores.
        inputs, outputs: the tensors of ``(args, kwargs)`` and of ``out``, in order, where
            the caller has found them already (the simulator has); found here otherwise.

    Returns:
        The operation's :class:`OpCost`.

    Examples:
        >>> import torch
        >>> peaks = Peaks("toy", flops_per_s={"fp32": 1e12}, bandwidth_bytes_per_s=1e11,
        ...               launch_seconds=0.0)
        >>> a = torch.empty(1000, device="meta")
        >>> c = op_cost(torch.ops.aten.add.Tensor, (a, a), {}, a + a, peaks)
        >>> c.bytes, c.bound, c.seconds  # a is read once, the result written once
        (8000, 'memory', 8e-08)
    """
    kwargs = kwargs or {}
    info = _OP_INFO.get(id(func))  # _info(func), its common case inline
    if info is None or info.func is not func:
        info = _info(func)
    if info.no_kernel:
        return OpCost(info.name, 0.0, 0, 0.0, "none")
    flops = 0.0
    if info.gemm is not None:  # flop_counter's mm/bmm formulas, 2·m·n·k, without the walk
        flops = 2.0 * out.numel() * args[info.gemm].shape[-1]
    elif info.on_shapes:  # the formula itself: shape_wrapper's pytree walk was most of the cost
        flops = _formula_flops(func, info, args, kwargs, out)
    elif info.count is not None:  # a formula that reads more than shapes (nested attention)
        flops = float(info.count(*args, **kwargs, out_val=out))
    if inputs is None:
        inputs = tensors_in((args, kwargs))
    if outputs is None:
        outputs = tensors_in(out)
    nbytes, dtype = _traffic(info.write_only, inputs, outputs)
    kclass = info.kclass
    if kclass == "conv" and dtype == torch.float32:
        tf32 = _kernels.conv_tf32()  # cuDNN's own flag, True by default
    precision = _PRECISION_OF.get((dtype, tf32)) or precision_of(dtype, tf32=tf32)
    timing = peaks.timing
    if timing is not None:
        # (the common cases inline: the simulator prices every kernel of every step)
        if kclass == "mem":
            if info.plain_memory:
                signature: tuple[Any, ...] = ("mem", nbytes, 1)
            else:
                signature = _kernels.memory_signature(func, args, nbytes)
        elif kclass == "gemm":
            if func.overloadpacket is _aten._scaled_mm:
                precision = "fp8"
            signature = ("gemm", *_kernels.gemm_dims(func, args, out), precision, nbytes)
        elif kclass == "conv":
            signature = _kernels.conv_signature(func, args, out, precision, nbytes)
        else:
            signature = _kernels.attention_signature(func, args, kwargs, flops, precision, nbytes)
        found = timing._cache.get(signature)  # timing.seconds(signature), inline
        seconds, kbound = found if found is not None else timing.seconds(signature)
        return OpCost(
            info.name, flops, nbytes, seconds, kbound, precision,  # type: ignore[arg-type]
            timing.host_seconds, signature,
        )  # fmt: skip
    compute = flops / peaks.flops_at(precision) if flops else 0.0
    memory = nbytes / peaks.bandwidth_bytes_per_s
    bound: Bound
    if peaks.launch_seconds > max(compute, memory):
        bound = "launch"
    else:
        bound = "compute" if compute > memory else "memory"
    return OpCost(
        info.name, flops, nbytes, max(compute, memory) + peaks.launch_seconds, bound, precision
    )


def transfer_seconds(nbytes: int, peaks: Peaks, direction: Literal["h2d", "d2h"] = "h2d") -> float:
    """Seconds to copy ``nbytes`` between host and device over the host link.

    Priced at the link's peak per-direction bandwidth plus one launch overhead: what a
    copy from pinned host memory can reach. Pageable memory is slower (it is staged
    through a pinned buffer); ``torchplace bench`` measures both on a real GPU.

    Args:
        nbytes: bytes to copy.
        peaks: the device (its ``host_bandwidth_bytes_per_s`` is used).
        direction: ``"h2d"`` (host to device) or ``"d2h"``; the catalog gives one
            figure per direction, the same both ways.

    Raises:
        ValueError: ``direction`` is not one of the two, ``nbytes`` is negative, or the
            device has no host link figure.

    Examples:
        >>> p = Peaks("toy", flops_per_s={"fp32": 1e12}, bandwidth_bytes_per_s=1e11,
        ...           host_bandwidth_bytes_per_s=25e9, launch_seconds=0.0)
        >>> transfer_seconds(50 * 10**9, p, "h2d")
        2.0
    """
    if direction not in ("h2d", "d2h"):
        raise ValueError(f"direction must be 'h2d' or 'd2h', got {direction!r}.")
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}.")
    if not peaks.host_bandwidth_bytes_per_s:
        raise ValueError(
            f"{peaks.name} has no host link bandwidth, so a transfer cannot be priced; "
            "give Peaks a host_bandwidth_bytes_per_s."
        )
    return nbytes / peaks.host_bandwidth_bytes_per_s + peaks.launch_seconds


@dataclass
class Totals:
    """Seconds, FLOPs, bytes and operation count summed over some operations.

    Attributes:
        seconds: total time.
        flops: total FLOPs.
        bytes: total bytes moved.
        ops: number of operations that ran a kernel.
        seconds_by_bound: time split by what bounds it.
        host_seconds: CPU time the host spent issuing them.
    """

    seconds: float = 0.0
    flops: float = 0.0
    bytes: int = 0
    ops: int = 0
    seconds_by_bound: dict[str, float] = field(default_factory=dict)
    host_seconds: float = 0.0

    def add(self, cost: OpCost) -> None:
        """Add one operation (views add nothing)."""
        if cost.bound == "none":
            return
        self.seconds += cost.seconds
        self.host_seconds += cost.host
        self.flops += cost.flops
        self.bytes += cost.bytes
        self.ops += 1
        self.seconds_by_bound[cost.bound] = self.seconds_by_bound.get(cost.bound, 0.0) + (
            cost.seconds
        )

    @property
    def bound(self) -> Bound:
        """The bound that accounts for most of the time (``"none"`` when empty)."""
        if not self.seconds_by_bound:
            return "none"
        return max(self.seconds_by_bound.items(), key=lambda kv: kv[1])[0]  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "seconds": self.seconds,
            "flops": self.flops,
            "bytes": self.bytes,
            "ops": self.ops,
            "bound": self.bound,
            "seconds_by_bound": dict(self.seconds_by_bound),
            "host_seconds": self.host_seconds,
        }


#: The scope of operations run outside any module.
TOP_LEVEL = "(outside modules)"


class StepEstimate:
    """Accumulates :class:`OpCost` into a step's time, by bound, by module and by op.

    The operations run as eager PyTorch runs them: the host issues them one after
    another (each costs it :attr:`OpCost.host`), and the GPU starts each kernel when it is
    free and the kernel has been issued. :attr:`seconds` is the time the last issued
    kernel ends (the run's clock); :attr:`gpu_seconds` the GPU's busy time, :attr:`host_seconds`
    the host's; :meth:`sync` makes the host wait for the GPU (``.item()``, ``.cpu()``).
    Where the host takes longer than the GPU, the GPU waits: the run is *host-bound*.

    Args:
        peaks: the device the costs were priced on (named in :meth:`to_dict`).

    Examples:
        >>> est = StepEstimate()
        >>> est.add(OpCost("aten.mm", 2e9, 12_000_000, 3e-3, "compute"), "fc1")
        >>> est.add(OpCost("aten.relu", 0.0, 8_000_000, 1e-3, "memory"), "act")
        >>> round(est.seconds, 6), est.total.bound, est.scopes["act"].bound
        (0.004, 'compute', 'memory')
        >>> slow_host = StepEstimate()
        >>> for _ in range(3):  # 1 µs kernels the host takes 10 µs each to issue
        ...     slow_host.add(OpCost("aten.add", 0.0, 8, 1e-6, "launch", host=1e-5))
        >>> round(slow_host.seconds * 1e6), round(slow_host.gpu_seconds * 1e6)
        (31, 3)
    """

    def __init__(self, peaks: Peaks | None = None) -> None:
        self.peaks = peaks
        self._total = Totals()
        self._scopes: dict[str, Totals] = {}
        self._ops: dict[str, Totals] = {}
        # Operations not yet summed into the tables: the simulator adds one per kernel and
        # reads the tables once per report, so they are summed when read (in order: the
        # same floating-point sums).
        self._pending: list[tuple[OpCost, str | None]] = []
        #: the run's clock: when the last issued kernel ends on the GPU (an attribute: the
        #: simulator's clock reads it at every allocation and free)
        self.seconds = 0.0
        #: when the host has issued the last operation
        self.host_clock = 0.0
        #: the GPU's busy time and the host's issuing time so far
        self.gpu_seconds = 0.0
        self.host_seconds = 0.0

    def add(self, cost: OpCost, scope: str | None = None) -> None:
        """Count one operation, attributed to module ``scope`` (``None``: no module)."""
        if cost[4] == "none":  # cost.bound (by index: the simulator adds every kernel)
            return
        host, seconds = cost[6], cost[3]  # cost.host, cost.seconds
        issued = self.host_clock + host
        self.host_clock = issued
        end = self.seconds
        self.seconds = (end if end > issued else issued) + seconds
        self.gpu_seconds += seconds
        self.host_seconds += host
        pending = self._pending
        pending.append((cost, scope))
        if len(pending) >= 4096:
            self._sum()

    def sync(self, until: float | None = None) -> None:
        """The host waits until the GPU has finished what it was given (or, with ``until``,
        the work up to that GPU time)."""
        target = self.seconds if until is None else min(until, self.seconds)
        if self.host_clock < target:
            self.host_clock = target

    @property
    def repeated_seconds(self) -> float:
        """Seconds per repetition when this work is issued again and again, back to back
        (a benchmark's loop): the GPU's busy time or the host's, whichever is longer."""
        return max(self.gpu_seconds, self.host_seconds)

    def mark(self) -> tuple[float, float, float]:
        """(clock, GPU busy, host) seconds so far: a step's figures are the differences of
        two marks."""
        return (self.seconds, self.gpu_seconds, self.host_seconds)

    def _sum(self) -> None:
        total, scopes, ops = self._total, self._scopes, self._ops
        for cost, scope in self._pending:
            total.add(cost)
            for table, key in ((scopes, scope or TOP_LEVEL), (ops, cost.op)):
                totals = table.get(key)
                if totals is None:
                    totals = table[key] = Totals()
                totals.add(cost)
        self._pending.clear()

    @property
    def total(self) -> Totals:
        """All operations."""
        self._sum()
        return self._total

    @property
    def scopes(self) -> dict[str, Totals]:
        """By module (the innermost running each operation), in order of first use."""
        self._sum()
        return self._scopes

    @property
    def ops(self) -> dict[str, Totals]:
        """By aten operation."""
        self._sum()
        return self._ops

    @property
    def flops(self) -> float:
        """Total FLOPs."""
        return self.total.flops

    @property
    def bytes(self) -> int:
        """Total bytes moved."""
        return self.total.bytes

    def top_ops(self, n: int = 10) -> list[tuple[str, Totals]]:
        """The ``n`` operations (by aten name) that take the most time."""
        return sorted(self.ops.items(), key=lambda kv: kv[1].seconds, reverse=True)[:n]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: device, totals, scopes in order of first use, top ops."""
        p = self.peaks
        return {
            "device": None if p is None else p.name,
            "measured_peaks": None if p is None else p.measured,
            **self.total.to_dict(),
            "wall_seconds": self.seconds,
            "gpu_seconds": self.gpu_seconds,
            "scopes": {k: v.to_dict() for k, v in self.scopes.items()},
            "top_ops": [{"op": k, **v.to_dict()} for k, v in self.top_ops()],
        }


def _innermost(parents: set[str]) -> str | None:
    named = [p for p in parents if p != "Global"]
    return max(named, key=lambda p: (p.count("."), p)) if named else None


class _CostMode(TorchDispatchMode):  # type: ignore[no-untyped-call, unused-ignore]
    def __init__(
        self, peaks: Peaks, tf32: bool, into: StepEstimate, tracker: ModuleTracker
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call, unused-ignore]
        self._peaks, self._tf32, self._into, self._tracker = peaks, tf32, into, tracker

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        cost = op_cost(func, args, kwargs, out, self._peaks, tf32=self._tf32)
        self._into.add(cost, _innermost(self._tracker.parents))
        return out


def estimate(
    fn: Callable[..., Any], *args: Any, peaks: Peaks, tf32: bool = False, **kwargs: Any
) -> StepEstimate:
    """Run ``fn(*args, **kwargs)`` and price every aten operation it runs on ``peaks``.

    Run it on meta tensors to price a model that would not fit here: nothing is
    computed and no memory is allocated. Operations are attributed to the innermost
    module running them (``torch.utils.module_tracker.ModuleTracker`` names such as
    ``"MLP.fc1"``), backward included.

    Args:
        fn: the callable, e.g. a function doing forward and backward.
        *args: passed to ``fn``.
        peaks: the device to price on (``Peaks.from_spec(torchplace.catalog.lookup("H100"))``).
        tf32: whether float32 matrix products run on TF32 tensor cores.
        **kwargs: passed to ``fn``.

    Returns:
        The :class:`StepEstimate`.

    Examples:
        >>> import torch
        >>> with torch.device("meta"):
        ...     model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU())
        ...     x = torch.empty(64, 512)
        >>> peaks = Peaks("toy", flops_per_s={"fp32": 1e12}, bandwidth_bytes_per_s=1e11)
        >>> est = estimate(lambda: model(x).sum().backward(), peaks=peaks)
        >>> est.flops == 2 * (2 * 64 * 512 * 512)  # forward and weight gradient
        True
        >>> sorted(est.scopes)
        ['(outside modules)', 'Sequential.0', 'Sequential.1']
    """
    into = StepEstimate(peaks)
    tracker = ModuleTracker()
    with tracker, _CostMode(peaks, tf32, into, tracker):
        fn(*args, **kwargs)
    return into
