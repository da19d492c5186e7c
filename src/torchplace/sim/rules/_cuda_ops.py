"""Which aten operators a CUDA build of torch runs, and for which dtypes: generated data.

``tools/gen_cuda_ops.py`` runs PyTorch's own OpInfo samples (``op_db``) through a CUDA build
of torch whose CUDA runtime runs host code only (``tools/host_only_cudart.c``): torch's
dispatcher, its argument checks and the ``AT_DISPATCH`` dtype switch of each CUDA kernel run
as on a GPU, and the errors they raise are CUDA's own. It records, for every aten operator
overload the samples reach below autograd (where the simulator's dispatch mode sees them)
and every signature (the dtypes of its tensor arguments, then its ``dtype`` arguments and
mode names, :func:`signature`):

- ``refuse``: the signatures CUDA refuses in its host code on every sample that reached
  them, with the exception type and text it raised (``"addmm_cuda" not implemented for
  'Long'``, ``HalfTensor is not supported``);
- ``no_kernel``: operators the CUDA build has no kernel for, with the dispatcher's "Could
  not run '<op>' with arguments from the 'CUDA' backend" text;
- ``widen``: the signatures CUDA runs and the CPU build refuses (fp16 FFT, integer
  ``histc``): the simulator computes them in a wider dtype on the CPU (:func:`run_wider`).

The data ships per torch minor version (``torchplace/data/cuda-ops-<major>.<minor>.json.gz``);
another version uses the nearest one's (:func:`table_version`). Lookups are per operator
overload (:func:`rule_for`, cached by the dispatch mode's per-overload record), so an
operator with no entry costs nothing per call.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

__all__ = [
    "CudaPath",
    "CudaRule",
    "call_class",
    "device_pattern",
    "dispatch_refusal",
    "dispatch_text",
    "expected_outputs",
    "function_key",
    "paths",
    "result_class",
    "rule_for",
    "run_wider",
    "shape_class",
    "signature",
    "signature_text",
    "table",
    "table_version",
]

_DTYPES = {
    str(d).removeprefix("torch."): d for d in vars(torch).values() if isinstance(d, torch.dtype)
}
_NAMES = {d: n for n, d in _DTYPES.items()}
_FILE = re.compile(r"cuda-ops-(\d+)\.(\d+)\.json\.gz$")


def signature(tensors: Sequence[torch.Tensor], args: Any, kwargs: Any) -> tuple[Any, ...]:
    """An aten call's signature: its tensors' dtypes in order (positional arguments first,
    as :func:`torchplace.cost.call_tensors` lists them), then ``None`` and its
    ``torch.dtype`` arguments and mode names if it has any (``sum(x, dtype=...)``,
    ``to(dtype)``, ``scatter_reduce(..., "amax")``).

    A mode name is a string argument that is an identifier (``reduce``, ``rounding_mode``,
    ``side``, ``approximate``): ATen may run each mode in its own kernel with its own dtype
    switch, so one mode's refusal is not another's (the 2.13 and 2.14 wheels' host code
    refuses ``scatter_reduce(..., "amax")`` of bool and runs ``"sum"``, as
    tools/gen_cuda_ops.py recorded). The dispatcher leaves out an argument equal to its
    default, as it does for the tables' calls."""
    found = tuple(t.dtype for t in tensors)
    chosen = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.dtype) or _mode(a)]
    return (*found, None, *chosen) if chosen else found


def _mode(a: Any) -> bool:
    return isinstance(a, str) and a.isidentifier()


def function_key(func: Any) -> str:
    """A torch function's name in the data files: ``module:qualified name``
    (``torch:tensor_split``, ``torch.functional:meshgrid``, ``:TensorBase.tensor_split``)."""
    module = getattr(func, "__module__", None) or ""
    return f"{module}:{getattr(func, '__qualname__', getattr(func, '__name__', repr(func)))}"


def device_pattern(tensors: Sequence[torch.Tensor], on_gpu: Sequence[bool]) -> str:
    """Where an aten call's tensors are: ``d`` on the GPU, ``h`` on the host, ``s`` a 0-dim
    host tensor, in the order :func:`signature` lists them (``"d,s"``: a GPU tensor and a
    host scalar)."""
    places = zip(tensors, on_gpu, strict=True)
    return ",".join("d" if gpu else ("s" if t.dim() == 0 else "h") for t, gpu in places)


def shape_class(tensors: Sequence[torch.Tensor]) -> str:
    """``"empty"`` if a tensor is empty, ``"scalar"`` if the first is 0-dim, else ``""``:
    many CUDA kernels return early for these, before their dtype switch."""
    if any(t.numel() == 0 for t in tensors):
        return "empty"
    return "scalar" if tensors and tensors[0].dim() == 0 else ""


def result_class(func: Any, args: Any, kwargs: Any) -> str:
    """A call without tensor arguments (a factory): the shape class of its result, from the
    meta function: ``"empty"`` if it has no element, ``"scalar"`` if one, else ``""``. CUDA's
    factory kernels return (``tril_indices(0, 0)``) or fill the one value
    (``linspace(a, b, 1)``) before their dtype switch (aten/src/ATen/native/cuda/
    TensorFactories.cu, RangeFactories.cu). The result's shape does not depend on its dtype,
    and a meta function may check the dtype (``tril_indices``' refuses floating ones): the
    call's own dtype is tried first, then int64 and float32."""
    out = _factory_result(func, args, kwargs)
    if out is None:
        return ""
    n = out.numel()
    return "empty" if n == 0 else "scalar" if n == 1 else ""


def _factory_result(func: Any, args: Any, kwargs: Any) -> torch.Tensor | None:
    """A factory call's result on the meta device, in the dtype the call asks for (its meta
    function tried with that dtype, then int64 and float32: the shape does not depend on
    it); None where the meta function gives no single tensor."""
    asked = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.dtype)]
    for dtype in (None, torch.int64, torch.float32):
        plan = {} if dtype is None else dict.fromkeys(_NAMES, dtype)
        out = _expected(func, *tree_map(functools.partial(_cast, plan=plan), (args, kwargs)))
        if isinstance(out, torch.Tensor):
            if dtype is not None and asked and out.dtype == dtype:
                out = torch.empty(out.shape, dtype=asked[0], device="meta")
            return out
    return None


def signature_text(sig: tuple[Any, ...], shape: str = "") -> str:
    """The signature as the data files write it: ``float16,float16``, ``int64|=float32``,
    ``bool,int64,bool|='amax'``; with its shape class, ``float32|empty``."""
    i = sig.index(None) if None in sig else len(sig)
    text = ",".join(_NAMES[d] for d in sig[:i])
    if i < len(sig):
        text += "|=" + ",".join(repr(d) if _mode(d) else _NAMES[d] for d in sig[i + 1 :])
    return f"{text}|{shape}" if shape else text


def _parse_signature(text: str) -> tuple[Any, ...] | None:
    tensors, _, chosen = text.partition("|=")
    try:
        found: tuple[Any, ...] = tuple(_DTYPES[n] for n in tensors.split(",") if n)
        if chosen:
            found += (None, *(n[1:-1] if n[0] == "'" else _DTYPES[n] for n in chosen.split(",")))
    except KeyError:  # a dtype this torch does not have (a newer table)
        return None
    return found


@dataclass(frozen=True)
class CudaRule:
    """What the CUDA build does with one operator overload that the CPU build does not."""

    missing: str | None  # "Could not run ...": the CUDA build has no kernel for it
    # signature -> CUDA's error, and the shape classes CUDA was seen to run it in
    refuse: dict[tuple[Any, ...], tuple[type[Exception], str, frozenset[str]]]
    widen: frozenset[tuple[Any, ...]]  # signatures CUDA runs and the CPU build refuses
    first: frozenset[Any]  # the first dtypes of the refused signatures (None: no tensor)
    # device mixing on one GPU (device_pattern): the patterns CUDA runs, those it refuses
    allow: frozenset[str] = frozenset()
    mixed_refuse: dict[str, tuple[type[Exception], str]] = field(default_factory=dict)
    # signature -> every (type, text) CUDA refused it with, where several (most common first)
    alternatives: dict[tuple[Any, ...], tuple[tuple[type[Exception], str], ...]] = field(
        default_factory=dict
    )

    def refusal(
        self, tensors: Sequence[torch.Tensor], args: Any, kwargs: Any, func: Any = None
    ) -> Exception | None:
        """CUDA's error for this call, or None where CUDA runs it (a call without tensors
        is told apart by its result's shape class, :func:`result_class`, given ``func``)."""
        if self.missing is not None:
            return NotImplementedError(self.missing)
        found = self.refuse.get(signature(tensors, args, kwargs))
        if found is None or (found[2] and _class_of(tensors, func, args, kwargs) in found[2]):
            return None
        return found[0](found[1])

    def texts(self, tensors: Sequence[torch.Tensor], args: Any, kwargs: Any) -> list[Any]:
        """Every (exception type, text) CUDA refused this call's signature with, the most
        common first (several where the kernel CUDA picks depends on more than the
        dtypes: a convolution's backend)."""
        sig = signature(tensors, args, kwargs)
        found = self.alternatives.get(sig)
        if found:
            return list(found)
        refused = self.refuse.get(sig)
        return [] if refused is None else [refused[:2]]

    def widens(
        self,
        tensors: Sequence[torch.Tensor],
        args: Any,
        kwargs: Any,
        *,
        pointwise: bool = False,
        func: Any = None,
    ) -> bool:
        """Whether CUDA runs this call where the CPU build refused it. A binary ``pointwise``
        operator (TensorIterator) runs its kernel on the operands' common dtype, so it is
        looked up as that dtype too (``complex32 / 2`` and ``complex32 / int64`` as
        ``complex32 / complex32``)."""
        sig = signature(tensors, args, kwargs)
        if sig in self.widen:
            return True
        if pointwise:
            alike = _binary_common(tensors, args)
            if alike is not None and (*alike, *sig[len(tensors) :]) in self.widen:
                return True
        found = self.refuse.get(sig)  # refused, but run in this call's shape class
        return found is not None and _class_of(tensors, func, args, kwargs) in found[2]

    def mixing(self, tensors: Sequence[torch.Tensor], on_gpu: Sequence[bool], gpu: int) -> Any:
        """CUDA's own outcome for tensors on one GPU and the host: True where it runs the
        call, its error where it refuses it, None where the data does not say."""
        pattern = device_pattern(tensors, on_gpu)
        if pattern in self.allow:
            return True
        found = self.mixed_refuse.get(pattern)
        if found is None:
            return None
        return found[0](found[1].replace("cuda:0", f"cuda:{gpu}"))


def call_class(tensors: Sequence[torch.Tensor], func: Any, args: Any, kwargs: Any) -> str:
    """A call's shape class: a factory's (an operator with a ``device`` argument, its
    tensors, if any, 0-dim numbers: ``linspace(start, end, steps)``) is its result's
    (:func:`result_class`). Any other call's is ``"empty"`` where its result (the meta
    function's first output) has no element, ``"filled"`` where a tensor is empty and the
    result is not, else its tensors' (:func:`shape_class`).

    CUDA kernels return early for an empty result, before their dtype switch
    (TensorIterator's ``numel() == 0``; ``pdist`` of one row), whatever the inputs. A result
    with elements made from an empty input is still filled, by kernels with their own dtype
    switch (``addmm`` of an empty product is ``self * beta``,
    aten/src/ATen/native/cuda/Blas.cpp)."""
    if func is not None and all(t.dim() == 0 for t in tensors) and is_factory(func):
        return result_class(func, args, kwargs)
    found = shape_class(tensors)
    size = None if func is None else _result_size(func, args, kwargs)
    if size == 0:
        return "empty"
    return "filled" if found == "empty" and size is not None else found


def _result_size(func: Any, args: Any, kwargs: Any) -> int | None:
    """The number of elements of a call's first tensor result, by its meta function (None
    where it has none)."""
    outs = tree_flatten(_expected(func, args, kwargs))[0]
    first = next((o for o in outs if isinstance(o, torch.Tensor)), None)
    return None if first is None else first.numel()


@functools.cache
def is_factory(func: Any) -> bool:
    """Whether an aten operator makes a tensor on a device it is given (a factory)."""
    return any(a.name == "device" for a in func._schema.arguments)


_class_of = call_class


def _binary_common(tensors: Sequence[torch.Tensor], args: Any) -> tuple[Any, ...] | None:
    """A binary operator's two operands (tensors, then a Python number) as TensorIterator
    computes them: both in their common dtype (``torch.result_type``: a number or a 0-dim
    tensor does not raise the other's category; aten/src/ATen/TensorIterator.cpp
    ``promote_inputs_to_common_dtype``, set for binary ops); None if not two operands."""
    numbers = [a for a in args if isinstance(a, (bool, int, float, complex))]
    if not tensors or len(tensors) + len(numbers) != 2:
        return None
    common = torch.result_type(tensors[0], [*tensors, *numbers][1])
    return (common, common)


def table_version(version: str | None = None) -> tuple[int, int] | None:
    """The torch minor version whose table serves ``version`` (the installed torch's by
    default): the same minor version if shipped, else the nearest one (ties: the older)."""
    major, minor = (int(p) for p in (version or torch.__version__).split(".")[:2])
    shipped = sorted(
        (int(m[1]), int(m[2]))
        for f in resources.files("torchplace").joinpath("data").iterdir()
        if (m := _FILE.search(f.name))
    )
    if not shipped:
        return None
    return min(shipped, key=lambda v: (abs((v[0] - major) * 100 + v[1] - minor), v))


_ERRORS: dict[str, type[Exception]] = {
    "NotImplementedError": NotImplementedError,
    "RuntimeError": RuntimeError,
    "TypeError": TypeError,
    "ValueError": ValueError,
    "IndexError": IndexError,
}


@functools.cache
def _data() -> dict[str, Any]:
    version = table_version()
    if version is None:
        return {}
    name = f"cuda-ops-{version[0]}.{version[1]}.json.gz"
    raw = resources.files("torchplace").joinpath("data").joinpath(name).read_bytes()
    data: dict[str, Any] = json.loads(gzip.decompress(raw))
    return data


@functools.cache
def table() -> dict[str, CudaRule]:
    """The installed torch's table: operator overload (``aten::mm.default``) -> its rule."""
    data = _data()
    if not data:
        return {}
    messages: list[str] = data["messages"]
    rules: dict[str, CudaRule] = {}
    mixing = data.get("mixing", {})
    for op in {*data["refuse"], *data["no_kernel"], *data["widen"], *mixing}:
        refuse = {}
        for text, (kind, index, runs) in data["refuse"].get(op, {}).items():
            sig = _parse_signature(text)
            if sig is not None:
                refuse[sig] = (_ERRORS.get(kind, RuntimeError), messages[index], frozenset(runs))
        widen = (_parse_signature(t) for t in data["widen"].get(op, ()))
        missing = data["no_kernel"].get(op)
        mixed = mixing.get(op, {})
        alternatives = {}
        for text, found in data.get("alternatives", {}).get(op, {}).items():
            sig = _parse_signature(text)
            if sig is not None:
                alternatives[sig] = tuple(
                    (_ERRORS.get(kind, RuntimeError), messages[i]) for kind, i in found
                )
        rules[op] = CudaRule(
            None if missing is None else messages[missing],
            refuse,
            frozenset(s for s in widen if s is not None),
            frozenset(sig[0] if sig else None for sig in refuse),
            frozenset(mixed.get("allow", ())),
            {
                p: (_ERRORS.get(kind, RuntimeError), messages[index])
                for p, (kind, index) in mixed.get("refuse", {}).items()
            },
            alternatives,
        )
    return rules


@dataclass(frozen=True)
class CudaPath:
    """A torch function whose code above the dispatcher takes another path on CUDA than on
    the CPU (:mod:`torchplace.sim.rules._cuda_path`): CUDA's errors there (first lines, device
    indices left out), the dtypes (of its first tensor) the samples differed for, and
    whether mixing devices made them differ."""

    texts: frozenset[str]
    dtypes: frozenset[torch.dtype]
    mixing: bool
    # dtype (of the first tensor) -> CUDA's error where every sample in it was refused on
    # CUDA's path (cuDNN's batch norm, which a build without cuDNN cannot take)
    refuse: dict[torch.dtype, tuple[type[Exception], str]] = field(default_factory=dict)


@functools.cache
def paths() -> dict[str, CudaPath]:
    """torch functions (:func:`function_key`) whose path differs on CUDA."""
    return {
        k: CudaPath(
            frozenset(v["texts"]),
            frozenset(_DTYPES[d] for d in v["dtypes"] if d in _DTYPES),
            bool(v["mixing"]),
            {
                _DTYPES[d]: (_ERRORS.get(kind, RuntimeError), text)
                for d, (kind, text) in v.get("refuse", {}).items()
                if d in _DTYPES
            },
        )
        for k, v in _data().get("paths", {}).items()
    }


def rule_for(func: Any) -> CudaRule | None:
    """The rule of an aten ``OpOverload`` (None: the CUDA build runs what the CPU runs)."""
    key = f"{func._schema.name}.{func._overloadname}"
    return table().get(key)


# --- real values the CPU build cannot compute in the dtype CUDA computes in ----------------

#: dtype -> the wider dtypes the CPU computes it in, nearest first
_WIDER = {
    torch.float16: (torch.float32, torch.float64),
    torch.bfloat16: (torch.float32, torch.float64),
    torch.complex32: (torch.complex64, torch.complex128),
    torch.complex64: (torch.complex128,),
    torch.bool: (torch.uint8, torch.int64, torch.float64),
    torch.uint8: (torch.int64, torch.float64),
    torch.int8: (torch.int64, torch.float64),
    torch.int16: (torch.int64, torch.float64),
    torch.int32: (torch.int64, torch.float64),
    torch.int64: (torch.float64,),
    torch.float32: (torch.float64,),
    **{  # float8: every value is exact in float32
        getattr(torch, name): (torch.float32,)
        for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
        if hasattr(torch, name)
    },
}


def dispatch_text(text: str) -> bool:
    """Whether an error text is the dispatcher's ("Could not run ...") or an ``AT_DISPATCH``
    dtype switch's (``"addmm_cuda" not implemented for 'Long'``: aten/src/ATen/Dispatch.h),
    not a library's (cuDNN's ``getCudnnDataTypeFromScalarType() not supported for Long``)."""
    return "\" not implemented for '" in text or text.startswith("Could not run '")


#: c10's names of the dtypes (c10/core/ScalarType.h), as AT_DISPATCH's refusals write them
_SCALAR_TYPES = {
    "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
    "int64": "Long", "float16": "Half", "float32": "Float", "float64": "Double",
    "bfloat16": "BFloat16", "complex32": "ComplexHalf", "complex64": "ComplexFloat",
    "complex128": "ComplexDouble", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64",
}  # fmt: skip


def dispatch_refusal(kernel: str, dtype: torch.dtype) -> NotImplementedError:
    """An ``AT_DISPATCH`` switch's refusal of ``dtype`` (aten/src/ATen/Dispatch.h:
    ``"<kernel>" not implemented for '<ScalarType>'``)."""
    name = _NAMES[dtype]
    scalar = _SCALAR_TYPES.get(name) or name[0].upper() + name[1:]  # Float8_e4m3fn
    return NotImplementedError(f"\"{kernel}\" not implemented for '{scalar}'")


def expected_outputs(func: Any, args: Any, kwargs: Any) -> Any:
    """The outputs the meta function gives the call (None where it has none)."""
    return _expected(func, args, kwargs)


def _expected(func: Any, args: Any, kwargs: Any) -> Any:
    """The outputs' shapes and dtypes, from the meta kernel (None where it has none)."""

    def to_meta(a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
        return a

    meta_kwargs = tree_map(to_meta, kwargs)
    if "device" in meta_kwargs:  # a factory's
        meta_kwargs["device"] = torch.device("meta")
    try:
        return func(*tree_map(to_meta, args), **meta_kwargs)
    except Exception:  # no meta kernel, or one that checks what the CPU checks
        return None


def run_wider(func: Any, args: Any, kwargs: Any, error: Exception) -> Any:
    """``func`` computed on the CPU in a wider dtype and cast back, for a call the CPU
    build refuses in a dtype CUDA computes in (``error`` is the CPU's, raised again where
    nothing below works).

    Each floating, complex or integer input is widened to the nearest dtype the CPU
    computes in (fp16/bf16 -> fp32 -> fp64, complex32 -> complex64 -> complex128, integers
    -> int64 -> fp64, float8 -> fp32); failing that, torch's own decomposition of the
    operator runs, in the call's dtypes and then the wider ones; an empty result is made
    from the meta function's shapes. The outputs take the dtypes the meta kernel
    gives the call (else the input dtypes they were widened from); arguments the operator
    writes get the result copied back. Values differ from CUDA's by the rounding of the
    narrower dtype (CUDA computes fp16 and bf16 in fp32 too, but rounds between steps).
    """
    written = [
        (i, a.name)
        for i, a in enumerate(func._schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write
    ]
    expected = _expected(func, args, kwargs)
    narrow = {t.dtype for t in _tensors((args, kwargs)) if t.dtype in _WIDER}
    given = [*args, *kwargs.values()]  # dtype= arguments (a factory's) widen too
    narrow |= {a for a in given if isinstance(a, torch.dtype) and a in _WIDER}
    # the floating dtypes first (an index tensor must stay int64), then every dtype
    floating = {d for d in narrow if d.is_floating_point or d.is_complex}
    plans: list[dict[torch.dtype, torch.dtype]] = []
    for step in range(3):
        for kinds in (floating, narrow):
            plan = {d: _WIDER[d][min(step, len(_WIDER[d]) - 1)] for d in kinds}
            if plan and plan not in plans:
                plans.append(plan)
    # then torch's own decomposition of the operator (torch._decomp), in the call's dtypes
    # and wider ones: complex nansum, which no CPU kernel computes
    from torch._decomp import decomposition_table

    decomposed = decomposition_table.get(func)
    attempts = [(func, plan) for plan in plans]
    if decomposed is not None:
        attempts += [(decomposed, {}), *((decomposed, plan) for plan in plans)]
    for run, plan in attempts:
        wide_args, wide_kwargs = tree_map(functools.partial(_cast, plan=plan), (args, kwargs))
        try:
            out = run(*wide_args, **wide_kwargs)
        except (RuntimeError, NotImplementedError):
            continue
        pairs = list(zip(args, wide_args, strict=True))
        pairs += [(kwargs[k], wide_kwargs[k]) for k in kwargs]
        for i, name in written:
            target, result = pairs[i] if i < len(args) else (kwargs[name], wide_kwargs[name])
            if isinstance(target, torch.Tensor) and target is not result:
                target.copy_(result)
        return _narrowed(out, expected, plan, pairs)
    if expected is None and not _tensors((args, kwargs)):
        expected = _factory_result(func, args, kwargs)  # its meta function refuses the dtype
    outs = expected if isinstance(expected, (list, tuple)) else (expected,)
    if expected is not None and all(isinstance(o, torch.Tensor) and not o.numel() for o in outs):
        # an empty result (CUDA returns before its dtype switch): the meta function's shapes
        # and dtypes are all there is to it
        inputs = _tensors((args, kwargs))
        device = inputs[0].device if inputs else torch.device("cpu")
        made = [
            torch.empty_strided(o.shape, o.stride(), dtype=o.dtype, device=device) for o in outs
        ]
        return made[0] if not isinstance(expected, (list, tuple)) else type(expected)(made)
    raise error


def _tensors(tree: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    tree_map(lambda a: found.append(a) if isinstance(a, torch.Tensor) else None, tree)
    return found


def _cast(a: Any, plan: dict[torch.dtype, torch.dtype]) -> Any:
    if isinstance(a, torch.Tensor) and a.dtype in plan:
        return a.to(plan[a.dtype])
    if isinstance(a, torch.dtype) and a in plan:
        return plan[a]
    return a


def _narrowed(
    out: Any, expected: Any, plan: dict[torch.dtype, torch.dtype], pairs: list[tuple[Any, Any]]
) -> Any:
    """The widened call's outputs as the original call's: an output that is a widened
    argument is that argument; the others are cast to the dtype the call would give."""
    back = {wide: narrow for narrow, wide in plan.items()}
    originals = {id(w): a for a, w in pairs if isinstance(a, torch.Tensor)}
    outs = out if isinstance(out, (list, tuple)) else (out,)
    wants = expected if isinstance(expected, (list, tuple)) else (expected,)
    fixed = []
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            fixed.append(o)
            continue
        if id(o) in originals:
            fixed.append(originals[id(o)])
            continue
        want = wants[i] if expected is not None and i < len(wants) else None
        dtype = want.dtype if isinstance(want, torch.Tensor) else back.get(o.dtype, o.dtype)
        fixed.append(o if o.dtype == dtype else o.to(dtype))
    if not isinstance(out, (list, tuple)):
        return fixed[0]
    return type(out)(fixed) if type(out) in (list, tuple) else type(out)(*fixed)
