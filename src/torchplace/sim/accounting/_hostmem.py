"""Host memory of real values: what an operation will take before it runs, and the room.

With real values every simulated tensor's data is computed in host memory, and an operation
too large for the host used to be computed anyway: the kernel's out-of-memory killer ended
the run (SIGKILL: no report, no line). So before an operation on a simulated GPU runs, the
dispatch mode asks :func:`need` for the host bytes it will take, and :class:`HostRoom`
whether the host has them:

- **Outputs**, from the operation's meta function (the shapes, dtypes and strides its CUDA
  kernel would give them), remembered per signature (operator, input shapes and dtypes,
  other arguments): a training loop repeats the same few hundred signatures. Pointwise
  operations (``torch.Tag.pointwise``) and in-place ones whose tensors all have one shape
  need no meta function: their outputs are that shape, and a bound from the inputs'
  element counts is enough (:func:`need`).
- **Temporaries the CPU makes and the GPU does not**: on the CPU, TensorIterator copies
  every input (and output) whose dtype is not the operation's common dtype into a temporary
  of that dtype before computing (``compute_types`` in aten/src/ATen/TensorIterator.cpp:
  "Creates temporaries for CPU operations ... if (common_device == kCPU)"); reductions cast
  their input to the output's dtype first (``make_reduction`` in
  aten/src/ATen/native/ReduceOpsUtils.h, ``self.to(in_dtype)``, where only CUDA keeps
  fp16/bf16 inputs for an fp32 result). CUDA kernels cast element by element. So the sum,
  cumulative sum or division of a 2 GiB int8 tensor takes 16 GiB (int64) or 8 GiB (fp32)
  more on the CPU than its result. Estimated from the operation's tags and dtypes
  (:func:`_temporaries`): for pointwise operations, reductions and operations whose result
  dtype is wider than their inputs' (scans such as ``cumsum``), each tensor of another dtype
  than the widest among them counts once more, in the widest dtype; boolean masks are read
  as they are, and copies (``_to_copy``, ``copy_``) cast element by element. Sorting and
  ``unique`` make temporaries of their own that this does not count. The CPU's attention
  with dropout (the simulator's flash and memory-efficient kernels' values) materialises
  the attention weights, which the GPU's kernels never do: counted too.

:class:`HostRoom` is the room left: the host-memory limit less the real values held, and
no more than the memory the machine has available now less a floor (1 GiB or 5 % of it),
read from ``/proc/meminfo`` when the room runs out and after each optimizer step, so the
limit follows other processes' memory during the run, not only at its start.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from torchplace.cost import arguments_key

__all__ = [
    "EXACT",
    "FOREACH",
    "INPLACE",
    "POINTWISE",
    "HostMemoryError",
    "HostRoom",
    "bound_kind",
    "hollow",
    "host_memory",
    "inplace_metadata",
    "need",
    "outputs",
]


class HostMemoryError(MemoryError):
    """Real values of the simulated GPUs' tensors would not fit in host memory."""


_GIB = 1024**3
_META = torch.device("meta")
_aten = torch.ops.aten
_POINTWISE = torch.Tag.pointwise
_REDUCTION = getattr(torch.Tag, "reduction", None)
_INPLACE = getattr(torch.Tag, "inplace", None)
_INPLACE_VIEW = torch.Tag.inplace_view
_COPIES = {_aten._to_copy.default, _aten.copy_.default}
# the CPU's values of the CUDA attention kernels (torchplace.sim.rules._kernels): with dropout,
# and in backward with dropout or a bias, they compute the attention weights in fp32
_ATTENTION = {
    _aten._scaled_dot_product_efficient_attention.default: (5, None),
    _aten._scaled_dot_product_flash_attention.default: (3, None),
    _aten._scaled_dot_product_efficient_attention_backward.default: (9, 4),
    _aten._scaled_dot_product_flash_attention_backward.default: (10, None),
}
_WIDEST_ITEMSIZE = 16  # complex128: the bound for an element of any dtype


def host_memory() -> tuple[int | None, int | None]:
    """(available, total) host memory in bytes from /proc/meminfo; (None, None) elsewhere."""
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
        return (
            int(fields["MemAvailable"].split()[0]) * 1024,
            int(fields["MemTotal"].split()[0]) * 1024,
        )
    except (OSError, KeyError, ValueError):
        return None, None


class HostRoom:
    """How many more bytes of real values the host may take before it is looked at again.

    ``left`` is spent by each operation's :func:`need` (frees do not give it back until the
    next look, so it only errs low); :meth:`look` sets it from the limit and the memory
    available now, from ``reader`` (:func:`host_memory` by default: the seam tests patch).
    """

    def __init__(
        self, limit: int | None, reader: Callable[[], tuple[int | None, int | None]] | None = None
    ) -> None:
        self.limit = limit
        self.reader = reader
        self.left = 0  # nothing until the first look
        self.available: int | None = None  # at the last look
        self.floor = 0

    def look(self, held: int) -> int:
        """Set and return the room: the limit less ``held`` (bytes of real values now), and
        at most the memory available now less the floor."""
        room = math.inf if self.limit is None else self.limit - held
        available, total = (self.reader or host_memory)()
        self.available = available
        if available is not None and total is not None:
            self.floor = max(_GIB, total // 20)
            room = min(room, available - self.floor)
        self.left = int(min(room, 2**62))
        return self.left

    def take(self, nbytes: int, held: int) -> bool:
        """Spend ``nbytes`` if the host has them (looking again first if the room is spent)."""
        if nbytes > self.left and nbytes > self.look(held):
            return False
        self.left -= nbytes
        return True


#: :func:`bound_kind`: how :func:`need` may bound an operator's host memory without its
#: meta function
EXACT, POINTWISE, INPLACE, FOREACH = 0, 1, 2, 3


def bound_kind(func: Any) -> int:
    """``INPLACE``: writes its arguments in place and changes no metadata, so its outputs
    are its arguments (temporaries aside), whatever the shapes; ``POINTWISE``
    (``torch.Tag.pointwise``): its outputs have its inputs' broadcast shape; ``FOREACH``: a
    ``_foreach_`` operator, elementwise over its lists; else ``EXACT``."""
    if inplace_metadata(func):
        return EXACT
    tags = func.tags
    name = func._schema.name
    inplace = (_INPLACE in tags) if _INPLACE is not None else name.endswith("_")
    if inplace:
        return INPLACE
    if _POINTWISE in tags:
        return POINTWISE
    return FOREACH if name.startswith("aten::_foreach_") else EXACT


def need(kind: int, func: Any, args: Any, kwargs: Any, leaves: list[torch.Tensor]) -> int:
    """Host bytes an operation will take: its new outputs and the CPU's temporaries.

    Where the outputs cannot be larger than the inputs — in place; pointwise on tensors of
    one shape (or of one element); a ``_foreach_`` operator over a single list — a bound
    serves without the meta function: every tensor's elements, twice (outputs and
    temporaries), at the widest element size; close enough where the room is gigabytes,
    and looked at exactly (``kind=EXACT``) where it is not.
    """
    if kind and leaves:
        if kind == POINTWISE:
            shape = leaves[0].shape
            for t in leaves:
                if t.shape != shape and t.numel() > 1:
                    break
            else:
                kind = INPLACE
        elif (
            kind == FOREACH
            and args
            and isinstance(args[0], (list, tuple))  # not _foreach_pow(scalar, tensors)
            and len(args[0]) == len(leaves)
        ):
            kind = INPLACE
        if kind == INPLACE:
            return 2 * _WIDEST_ITEMSIZE * sum([t.numel() for t in leaves])
    found = _signature(func, args, kwargs)
    return found[0] + found[1]


def _key(func: Any, args: Any, kwargs: Any) -> tuple[Any, ...]:
    """An operation's signature: its operator, each tensor's shape and dtype, the other
    arguments (the common case without a call per argument: a training step looks up a few
    hundred signatures)."""
    key: list[Any] = [id(func)]  # (an OpOverload hashes in Python; operators stay alive)
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append(a.shape)
            key.append(a.dtype)
        elif isinstance(a, (list, tuple)):  # sizes and dimensions, mostly: no call a number
            key.append(tuple(a) if set(map(type, a)) <= _PLAIN else arguments_key(a, _layout))
        elif isinstance(a, dict):
            key.append(arguments_key(a, _layout))
        else:  # (its type too: full(size, 1), 1.0 and True make int64, float and bool)
            key.append(type(a))
            key.append(a)
    if kwargs:
        types = tuple(map(type, kwargs.values()))
        key.append(types)
        plain = set(types) <= _PLAIN
        key.append(tuple(kwargs.items()) if plain else arguments_key(kwargs, _layout))
    return tuple(key)


#: argument types that stand for themselves in a signature
_PLAIN = {int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout,
          torch.memory_format}  # fmt: skip


def outputs(func: Any, args: Any, kwargs: Any) -> list[int]:
    """The bytes of each new storage the operation makes (from its meta function), or an
    empty list if that is not known."""
    return list(_signature(func, args, kwargs)[2])


#: (operator, argument signature) -> (output bytes, temporary bytes, new storages' bytes)
_SIGNATURES: dict[Any, tuple[int, int, tuple[int, ...]]] = {}


def _layout(t: torch.Tensor) -> tuple[Any, ...]:
    return (t.shape, t.dtype)


def _signature(func: Any, args: Any, kwargs: Any) -> tuple[int, int, tuple[int, ...]]:
    key = _key(func, args, kwargs)
    try:
        found = _SIGNATURES.get(key)
    except TypeError:  # an argument that does not hash
        return _measure(func, args, kwargs)
    if found is None:
        found = _measure(func, args, kwargs)
        if len(_SIGNATURES) >= 4096:  # shapes that keep changing, as in generation
            _SIGNATURES.clear()
        _SIGNATURES[key] = found
    return found


def _measure(func: Any, args: Any, kwargs: Any) -> tuple[int, int, tuple[int, ...]]:
    """Run the meta function on meta copies of the arguments; count what is new."""
    flat, spec = tree_flatten((args, kwargs))
    meta_of: dict[int, torch.Tensor] = {}  # the meta copies' storages -> the arguments
    copies: list[Any] = []
    for a in flat:
        if isinstance(a, torch.Tensor):
            if a.layout != torch.strided:  # sparse and others: refused or kept on the host
                return 0, 0, ()
            m = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=_META)
            meta_of[m.untyped_storage()._cdata] = a
            copies.append(m)
        elif isinstance(a, torch.device):
            copies.append(_META)
        elif isinstance(a, torch.Generator):
            copies.append(None)
        else:
            copies.append(a)
    margs, mkwargs = tree_unflatten(copies, spec)
    if "device" in mkwargs:
        mkwargs["device"] = _META
    try:
        out = func(*margs, **mkwargs)
    except Exception:  # no meta function (data-dependent shapes), or an error the real
        return 0, 0, ()  # operation raises itself: nothing known, nothing to hold it back
    out_flat = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    if any(t.layout != torch.strided for t in out_flat):
        return 0, 0, ()  # (the simulation refuses such outputs plainly after this)
    new: list[int] = []
    for t in out_flat:
        source = meta_of.get(t.untyped_storage()._cdata)  # an argument, or a view of one
        nbytes = t.untyped_storage().nbytes()
        if source is None:
            new.append(nbytes)
        elif nbytes > source.untyped_storage().nbytes():  # resize_ and out= that grow
            new.append(nbytes - source.untyped_storage().nbytes())
    inputs = [a for a in flat if isinstance(a, torch.Tensor)]
    temporary = _temporaries(func, inputs, out_flat, meta_of) + _attention(func, args, kwargs)
    return sum(new), temporary, tuple(new)


def _temporaries(
    func: Any, inputs: list[torch.Tensor], outs: list[torch.Tensor], meta_of: dict[int, Any]
) -> int:
    """The CPU's cast copies (module docstring): each tensor of another dtype than the
    widest among an operation's tensors, in the widest dtype."""
    if func in _COPIES or not inputs or not outs:
        return 0
    tags = func.tags
    out_dtypes = {t.dtype for t in outs}
    widening = len(out_dtypes) == 1 and all(
        next(iter(out_dtypes)).itemsize > t.dtype.itemsize for t in inputs
    )
    if not (_POINTWISE in tags or (_REDUCTION is not None and _REDUCTION in tags) or widening):
        return 0
    tensors = [t for t in inputs if t.dtype != torch.bool] + [
        t for t in outs if t.untyped_storage()._cdata not in meta_of
    ]
    if not tensors:
        return 0
    widest = tensors[0].dtype
    for t in tensors[1:]:
        try:
            widest = torch.promote_types(widest, t.dtype)
        except RuntimeError:  # float8 promotes with nothing (c10 promoteTypes): the larger
            widest = max(widest, t.dtype, key=lambda d: d.itemsize)
    return sum(t.numel() * widest.itemsize for t in tensors if t.dtype != widest and t.numel() > 1)


def _attention(func: Any, args: Any, kwargs: Any) -> int:
    """The attention weights the CPU computes for the simulated flash and memory-efficient
    kernels with dropout (or, backward, a bias): scores, weights and the dropout mask in
    fp32 (torchplace.sim.rules._kernels)."""
    where = _ATTENTION.get(func)
    if where is None:
        return 0
    dropout_at, bias_at = where
    dropout = args[dropout_at] if len(args) > dropout_at else kwargs.get("dropout_p", 0.0)
    bias = args[bias_at] if bias_at is not None and len(args) > bias_at else None
    if not dropout and bias is None:
        return 0  # the CPU's own flash kernel: no weights held
    q, k = (args[1], args[2]) if "backward" in func._schema.name else (args[0], args[1])
    return 3 * 4 * math.prod(q.shape[:-1]) * k.shape[-2]


def inplace_metadata(func: Any) -> bool:
    """Whether an operator changes a tensor's metadata in place (``resize_``, ``t_``,
    ``set_``): it reads no data, so it runs as it is whatever the values."""
    return _INPLACE_VIEW in func.tags or func._schema.name == "aten::set_"


def hollow(shape: Any, stride: Any, dtype: torch.dtype) -> torch.Tensor:
    """A host tensor whose memory is never written: placeholder values on the host backing.

    The CPU allocator's memory is not resident until written. Linux refuses a single
    allocation larger than its memory and swap (its overcommit heuristic), and under strict
    overcommit any that does not fit: such a tensor is mapped from a sparse temporary file
    instead (shared, so not counted against the commit limit), which takes neither memory
    nor disk until written.
    """
    try:
        return torch.empty_strided(shape, stride, dtype=dtype)
    except RuntimeError as e:
        if "can't allocate memory" not in str(e):
            raise
    numel = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) if all(shape) else 0
    fd, path = tempfile.mkstemp(prefix="torchplace-placeholder-")
    os.close(fd)
    try:
        flat = torch.from_file(path, shared=True, size=numel, dtype=dtype)
    finally:
        os.unlink(path)  # the mapping stays
    return flat.as_strided(shape, stride)
