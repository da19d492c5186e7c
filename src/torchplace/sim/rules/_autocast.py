"""CUDA autocast for simulated tensors, applied in the dispatcher where CUDA applies it.

PyTorch's ``AutocastCUDA`` kernels run only for tensors whose dispatch keys say ``cuda``;
simulated tensors are ``cpu`` or ``meta`` ones. So for each operator CUDA autocast has a
kernel for (``data/cuda_autocast_<version>.json``, generated from torch's own dispatcher by
``tools/gen_autocast.py``), the simulation registers a kernel of its own under a dispatch key
no tensor carries (``AutocastPrivateUse1``) and puts that key into the thread's dispatch key
set exactly while ``torch.is_autocast_enabled("cuda")`` is true. As on CUDA, the casts happen
above autograd (backward sees ``ToCopyBackward0``), every call counts — including the ones a
composite operator makes inside (``einsum``'s ``bmm``) — and nothing inside an autocast
kernel's own call is cast again.

The cast rules are aten/src/ATen/autocast_mode.h's (``cached_cast``, ``prioritize``,
``set_opt_dtype``, ``type_from_firstarg``), ported, with autocast's cache of casted fp32
leaves that require grad, cleared when the outermost ``torch.autocast`` exits.
"""

from __future__ import annotations

import contextlib
import json
import threading
import weakref
from collections.abc import Callable, Iterator
from functools import cache
from importlib import resources
from typing import Any

import torch

__all__ = ["excluded", "installed", "policy_of", "sdpa_arguments", "table"]

_KEY = torch._C.DispatchKey.AutocastPrivateUse1  # type: ignore[attr-defined]
_KEYSET = torch._C.DispatchKeySet(_KEY)
_aten = torch.ops.aten
_F32, _F64 = torch.float32, torch.float64
# aten/src/ATen/native/RNN.cpp: nn.LSTM/GRU/RNN on CUDA run cuDNN's kernel (_cudnn_rnn,
# through the *_cudnn stubs when at::cudnn_is_acceptable(input)), whose autocast kernel is
# AutocastRNN.cpp's; simulated tensors run the native kernels, so its rule applies to these.
_RNN_OPS = tuple(
    f"aten::{kind}.{form}" for kind in ("lstm", "gru", "rnn_tanh", "rnn_relu")
    for form in ("input", "data")
)  # fmt: skip


@cache
def table(version: str | None = None) -> dict[str, dict[str, Any]]:
    """CUDA autocast's operators and their policies for torch ``version`` (major.minor; the
    installed torch's by default; the nearest shipped version at or below it, else the
    oldest shipped)."""
    if version is None:
        version = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    files = resources.files("torchplace") / "data"
    shipped = sorted(
        (tuple(int(p) for p in f.name[len("cuda_autocast_") : -5].split(".")), f)
        for f in files.iterdir()
        if f.name.startswith("cuda_autocast_") and f.name.endswith(".json")
    )
    wanted = tuple(int(p) for p in version.split("."))
    below = [f for v, f in shipped if v <= wanted]
    chosen = below[-1] if below else shipped[0][1]
    ops: dict[str, dict[str, Any]] = json.loads(chosen.read_text())["ops"]
    return ops


def policy_of(name: str) -> str | None:
    """The CUDA autocast policy of aten operator ``name`` ("aten::mm", "aten::softmax.int")."""
    entry = table().get(name)
    return None if entry is None else entry["policy"]


class _Autocast:
    """One simulation's autocast: which tensors are eligible, and the cast cache."""

    def __init__(self, label: Callable[[torch.Tensor], int | None]) -> None:
        self.label = label
        # id(fp32 leaf) -> (weak reference to it, its cast) (autocast_mode.cpp cached_casts)
        self.cache: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] = {}

    # aten/src/ATen/autocast_mode.h is_autocast_eligible (a CUDA tensor, floating point)
    def on_gpu(self, t: Any) -> bool:
        return (
            isinstance(t, torch.Tensor) and t.dtype.is_floating_point and self.label(t) is not None
        )

    # autocast_mode.h is_eligible: and not double
    def eligible(self, t: Any) -> bool:
        return self.on_gpu(t) and t.dtype != _F64

    def cast(self, dtype: torch.dtype, arg: Any) -> Any:
        """autocast_mode.cpp cached_cast, for a tensor, an optional one or a list of them."""
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.cast(dtype, a) for a in arg)
        if not self.eligible(arg) or arg.dtype == dtype:
            return arg
        if (
            dtype == torch.get_autocast_dtype("cuda")
            and arg.dtype == _F32
            and arg.requires_grad
            and arg.is_leaf
            and not arg._is_view()
            and torch.is_autocast_cache_enabled()
        ):
            hit = self.cache.get(id(arg))
            if hit is not None and hit[0]() is arg:
                return hit[1]
            casted = arg.to(dtype)
            self.cache[id(arg)] = (weakref.ref(arg), casted)
            return casted
        return arg.to(dtype)

    def promote_type(self, values: Any) -> torch.dtype:
        """autocast_mode.h promote_type / prioritize: float32 wins over the autocast dtype;
        doubles are ignored; any other floating dtype is an error, as on CUDA."""
        lower = current = torch.get_autocast_dtype("cuda")
        for v in values:
            for t in v if isinstance(v, (list, tuple)) else (v,):
                if not self.on_gpu(t) or t.dtype == _F64:
                    continue
                if current == _F32 or t.dtype == _F32:
                    current = _F32
                elif not (current == lower and t.dtype == lower):
                    raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
        return current

    def arguments(
        self, entry: dict[str, Any], schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
        """(the operator to call, its arguments) under CUDA autocast's ``entry``; None for
        the operator means the one called."""
        policy = entry["policy"]
        if policy == "banned":
            raise RuntimeError(entry["message"])
        if policy in ("lower_precision_fp", "fp32", "promote", "cudnn_rnn"):
            if policy == "lower_precision_fp":
                dtype = torch.get_autocast_dtype("cuda")
            elif policy == "fp32":
                dtype = _F32
            elif policy == "cudnn_rnn":  # AutocastRNN.cpp: kHalf, whatever autocast's dtype
                dtype = torch.float16
            else:
                dtype = self.promote_type((*args, *kwargs.values()))
            args = tuple(self.cast(dtype, a) for a in args)
            kwargs = {k: self.cast(dtype, v) for k, v in kwargs.items()}
            return None, args, kwargs
        first = args[0] if args else None
        if policy == "fp32_set_opt_dtype":
            if not self.eligible(first):
                return None, args, kwargs
            names = [a.name for a in schema.arguments]
            index = names.index("dtype")
            if index < len(args):
                if args[index] is None:
                    args = (*args[:index], _F32, *args[index + 1 :])
            elif kwargs.get("dtype") is None:
                kwargs = {**kwargs, "dtype": _F32}
            return None, args, kwargs
        if policy == "fp32_append_dtype":
            target = _overload(entry["redispatch"])
            out = _F32 if self.eligible(first) else args[0].dtype
            full = list(args)
            for a in schema.arguments[len(args) :]:
                full.append(kwargs.get(a.name, a.default_value))
            return target, (*full, out), {}
        raise AssertionError(f"unknown autocast policy {policy!r}")


def _overload(name: str) -> Any:
    base, _, overload = name.partition("::")[2].partition(".")
    return getattr(getattr(_aten, base), overload or "default")


_active: _Autocast | None = None
_lock = threading.Lock()
_fallback: list[Any] = []  # the library holding the key's fallthrough (registered once)


def _sync() -> None:
    """Put the simulation's key in this thread's dispatch keys iff CUDA autocast is on."""
    on = _active is not None and torch.is_autocast_enabled("cuda")
    torch._C._dispatch_tls_set_dispatch_key_included(_KEY, on)
    torch._C._dispatch_tls_set_dispatch_key_excluded(_KEY, not on)


def excluded() -> Any:
    """A context in which the simulation's autocast kernels do not run (an autocast kernel's
    own call, on CUDA: ExcludeDispatchKeyGuard in autocast_mode.h's wrappers)."""
    return torch._C._ExcludeDispatchKeyGuard(_KEYSET)


def _cudnn_acceptable(t: Any) -> bool:
    """aten/src/ATen/native/ConvUtils.h/Utils cudnn_is_acceptable: cuDNN enabled, a CUDA
    tensor of double, float or half, not empty."""
    return (
        torch.backends.cudnn.enabled
        and isinstance(t, torch.Tensor)
        and t.dtype in (torch.float64, torch.float32, torch.float16)
        and t.numel() > 0
    )


def _kernel(op: Any, entry: dict[str, Any]) -> Callable[..., Any]:
    schema = op._schema
    rnn = entry["policy"] == "cudnn_rnn"

    def kernel(*args: Any, **kwargs: Any) -> Any:
        with excluded():
            autocast = _active
            if autocast is None:  # a thread still in autocast after its simulation ended
                return op(*args, **kwargs)
            if rnn and not (autocast.eligible(args[0]) and _cudnn_acceptable(args[0])):
                return op(*args, **kwargs)  # the native kernels: no cuDNN, no cast here
            target, args, kwargs = autocast.arguments(entry, schema, args, kwargs)
            return (target or op)(*args, **kwargs)

    return kernel


def sdpa_arguments(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any]:
    """``scaled_dot_product_attention``'s tensors as CUDA autocast hands them on (its entry
    in the table), for the simulation's own SDPA, which calls the kernels directly."""
    entry = table().get("aten::scaled_dot_product_attention")
    if _active is None or entry is None or not torch.is_autocast_enabled("cuda"):
        return query, key, value, attn_mask
    schema = _aten.scaled_dot_product_attention.default._schema
    _, args, _ = _active.arguments(entry, schema, (query, key, value, attn_mask), {})
    return args[0], args[1], args[2], args[3]


@contextlib.contextmanager
def installed(label: Callable[[torch.Tensor], int | None]) -> Iterator[None]:
    """CUDA autocast for the tensors ``label`` places on a simulated GPU, for the duration."""
    global _active
    with _lock:
        if not _fallback:  # ops without a kernel of ours fall through (kept: harmless)
            lib = torch.library.Library("_", "IMPL")
            lib.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
            _fallback.append(lib)
    lib = torch.library.Library("aten", "IMPL")
    ops = dict(table())
    rnn = ops.pop("aten::_cudnn_rnn", None)
    if rnn is not None:
        ops.update({name: rnn for name in _RNN_OPS})
    for name, entry in ops.items():
        try:
            op = _overload(name)
        except AttributeError:  # an operator of another torch version's table
            continue
        lib.impl(name.partition("::")[2], _kernel(op, entry), "AutocastPrivateUse1")
    bindings = _bindings()
    saved = _active, [(name, getattr(torch, name)) for name in bindings]
    for name, value in bindings.items():
        setattr(torch, name, value)
    _active = _Autocast(label)
    _sync()
    try:
        yield
    finally:
        _active = saved[0]
        for name, value in saved[1]:
            setattr(torch, name, value)
        _sync()
        lib._destroy()


def _bindings() -> dict[str, Callable[..., None]]:
    """torch's autocast bindings, followed: entering or leaving ``torch.autocast("cuda")``
    (torch/amp/autocast_mode.py calls ``torch.set_autocast_enabled``) switches the
    simulation's kernels on or off, and ``torch.clear_autocast_cache`` (called when the
    outermost autocast exits) clears its cache too."""
    set_enabled, clear = torch.set_autocast_enabled, torch.clear_autocast_cache

    def set_autocast_enabled(*args: Any, **kwargs: Any) -> None:
        set_enabled(*args, **kwargs)
        _sync()

    def clear_autocast_cache() -> None:
        clear()
        if _active is not None:
            _active.cache.clear()

    return {
        "set_autocast_enabled": set_autocast_enabled,
        "clear_autocast_cache": clear_autocast_cache,
    }
