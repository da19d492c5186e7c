"""The two torch modes that make simulated GPUs work.

``SimFunctionMode`` (a ``TorchFunctionMode``, above autograd) is what the user's code
talks to: it rewrites ``device="cuda..."`` to ``meta``, implements ``.to()``, ``.cuda()``,
``.cpu()`` and ``copy_`` across host and simulated devices, answers ``Tensor.device``,
``is_cuda`` and ``get_device()`` from the simulator's labels, returns placeholders for
values that would need the GPU's data, and emulates CUDA autocast and the SDPA kernel
choice of the target GPU.

``SimDispatchMode`` (a ``TorchDispatchMode``, below autograd, so it also sees the backward
pass and the optimizers) propagates labels from inputs to outputs, enforces CUDA's device
rules with PyTorch's own error text, and accounts every new storage.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from torchplace.sim import _autocast
from torchplace.sim._state import SimState

__all__ = ["SimDispatchMode", "SimFunctionMode", "invalid_ordinal", "placeholder_scalar"]

_META = torch.device("meta")
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
_FALLBACK_MAX_NUMEL = 1 << 24  # ops without a meta kernel run on zeros up to this size


def invalid_ordinal(index: int, count: int) -> RuntimeError:
    """CUDA's error for a device ordinal that does not exist."""
    err = getattr(torch, "AcceleratorError", RuntimeError)
    return err(
        "CUDA error: invalid device ordinal\n"
        f"(simulated: cuda:{index} requested but {count} simulated GPU(s) exist; "
        "use --gpus to simulate more)"
    )


def placeholder_scalar(dtype: torch.dtype) -> bool | int | float | complex:
    """The documented stand-in for a value read from a simulated GPU: zero of the dtype."""
    if dtype == torch.bool:
        return False
    if dtype.is_complex:
        return 0j
    if dtype.is_floating_point:
        return 0.0
    return 0


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [a for a in tree_flatten(tree)[0] if isinstance(a, torch.Tensor)]


class _Mover(torch.autograd.Function):
    """A differentiable move to or from a simulated device (the data is never there)."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, make: Callable[[], torch.Tensor], back: Any) -> Any:
        ctx.back = back
        return make()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        return ctx.back(grad), None, None


class SimDispatchMode(TorchDispatchMode):
    """Labels, device rules and memory accounting for every aten op."""

    def __init__(self, state: SimState, on_op: Callable[..., None] | None = None) -> None:
        super().__init__()
        self.state = state
        self.target: int | None = None  # label for factory outputs inside a simulated call
        self.explicit: int | None = None  # label given by an explicit device= argument
        self.on_op = on_op

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        # Reached from C++ (a storage copy, the autograd engine), the function mode may still
        # be active; below autograd only the real devices count.
        with torch._C.DisableTorchFunction():
            return self._dispatch(func, args, kwargs or {})

    def _dispatch(self, func: Any, args: Any, kwargs: Any) -> Any:
        state = self.state
        leaves = _tensors((args, kwargs))
        labels: list[int] = []
        first: tuple[torch.Tensor, str] | None = None
        offender: tuple[torch.Tensor, str] | None = None
        has_cpu_scalar = has_user_meta = False
        for a in leaves:
            if a.is_meta:
                label = state.label(a)
                if label is None:
                    has_user_meta = True
                    dev = "meta"
                else:
                    labels.append(label)
                    dev = f"cuda:{label}"
            elif a.device.type == "cpu" and a.dim() == 0:
                has_cpu_scalar = True  # CUDA accepts 0-dim CPU tensors anywhere
                continue
            else:
                dev = str(a.device)
            if first is None:
                first = (a, dev)
            elif offender is None and dev != first[1]:
                offender = (a, dev)

        if func is _COPY and (labels or self.explicit is not None):
            return self._copy(args, kwargs)
        if self.explicit is not None:
            out_label: int | None = self.explicit
        elif labels:
            if offender is not None and first is not None:
                raise _mismatch(func, args, kwargs, offender[0], offender[1], first[1])
            out_label = labels[0]
        elif not leaves or (has_cpu_scalar and not has_user_meta and len(leaves) == 1):
            out_label = self.target  # a factory inside a simulated call (or None)
        else:
            out_label = None
        if out_label is None:
            return func(*args, **kwargs)

        if has_cpu_scalar:
            args, kwargs = tree_map(_scalar_to_meta, (args, kwargs))
        if func in _GEMMS:
            state.ensure_cublas_workspace(out_label)
        if func is _aten._local_scalar_dense.default:
            state.record_sync("item")
            state.transfer("d2h", args[0].element_size())
            return placeholder_scalar(args[0].dtype)
        try:
            out = func(*args, **kwargs)
        except NotImplementedError:
            out = self._run_on_zeros(func, args, kwargs)
        for t in _tensors(out):
            if t.is_meta:
                state.register(t, out_label)
        if self.on_op is not None:
            self.on_op(func, args, kwargs, out, out_label)
        return out

    def _copy(self, args: Any, kwargs: Any) -> Any:
        """``dst.copy_(src)`` across the host and simulated devices."""
        dst, src = args[0], args[1]
        state = self.state
        dst_label = state.label(dst) if dst.is_meta else None
        src_label = state.label(src) if src.is_meta else None
        nbytes = dst.numel() * dst.element_size()
        if dst_label is not None and src_label is None and not src.is_meta:
            state.transfer("h2d", nbytes)
            src = torch.empty_like(src, device=_META)
        elif dst_label is None and src_label is not None and not dst.is_meta:
            state.transfer("d2h", nbytes)
            if not (len(args) > 2 and args[2]) and not kwargs.get("non_blocking"):
                state.record_sync("copy_ to host")
            return dst.zero_()  # placeholder: the simulated GPU holds no data
        elif dst_label is not None and src_label is not None and dst_label != src_label:
            state.transfer("d2d", nbytes)
        return _COPY(dst, src, *args[2:], **kwargs)

    def _run_on_zeros(self, func: Any, args: Any, kwargs: Any) -> Any:
        """Ops without a meta kernel (data-dependent shapes) run on placeholder zeros."""
        numel = sum(t.numel() for t in _tensors((args, kwargs)) if t.is_meta)
        name = str(func).split(".")[1] if "." in str(func) else str(func)
        if numel > _FALLBACK_MAX_NUMEL:
            self.state.note(f"{name}: no meta kernel and inputs too large to run on zeros")
            raise NotImplementedError(
                f"torchplace sim cannot model aten.{name} on inputs of {numel} elements: "
                "it has no shape function and its output shape depends on the data"
            )
        self.state.note(f"{name}: output shape depends on data; computed from placeholder zeros")

        def zeros(t: Any) -> Any:
            if isinstance(t, torch.Tensor) and t.is_meta:
                return torch.zeros(t.shape, dtype=t.dtype)
            return t

        real = func(*tree_map(zeros, args), **tree_map(zeros, kwargs))

        def to_meta(t: Any) -> Any:
            if isinstance(t, torch.Tensor):
                return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=_META)
            return t

        return tree_map(to_meta, real)


def _scalar_to_meta(a: Any) -> Any:
    if isinstance(a, torch.Tensor) and not a.is_meta and a.dim() == 0:
        return torch.empty((), dtype=a.dtype, device=_META)
    return a


def _mismatch(
    func: Any, args: Any, kwargs: Any, bad: torch.Tensor, bad_dev: str, common: str
) -> RuntimeError:
    name = "argument"
    schema = getattr(func, "_schema", None)
    if schema is not None:
        values = list(args) + [kwargs.get(a.name) for a in schema.arguments[len(args) :]]
        for arg, value in zip(schema.arguments, values, strict=True):
            if value is bad or (isinstance(value, (list, tuple)) and any(v is bad for v in value)):
                name = arg.name
                break
    op = getattr(func, "__name__", str(func)).split(".")[0]
    return RuntimeError(
        "Expected all tensors to be on the same device, but got "
        f"{name} is on {bad_dev}, different from other tensors on {common} "
        f"(when checking argument in method wrapper_CUDA_{op})"
    )


class SimFunctionMode(TorchFunctionMode):
    """The user-facing side of the simulation (see the module docstring)."""

    def __init__(self, state: SimState, dispatch: SimDispatchMode) -> None:
        super().__init__()
        self.state = state
        self.dispatch = dispatch
        self.autocast_cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        t: Any = _T
        self._handlers: dict[Any, Callable[..., Any]] = {
            t.device.__get__: self._device,
            t.is_cuda.__get__: lambda x: self._label(x) is not None or x.is_cuda,
            t.is_meta.__get__: lambda x: x.is_meta and self._label(x) is None,
            t.get_device: lambda x: (
                self._label(x) if self._label(x) is not None else x.get_device()
            ),
            t.to: self._to_method,
            t.cuda: self._cuda_method,
            t.cpu: lambda x, memory_format=torch.preserve_format: self._move(
                x, "cpu", None, False, memory_format
            ),
            t.item: self._item,
            t.tolist: self._tolist,
            t.__bool__: self._bool,
            t.__int__: lambda x: int(self._item(x)),
            t.__float__: lambda x: float(self._item(x)),
            t.__index__: lambda x: int(self._item(x)),
            t.numpy: self._numpy,
            t.__array__: self._numpy,
            t.__repr__: self._repr,
            t.__format__: self._format,
            F.scaled_dot_product_attention: self._sdpa,
            F.dropout: self._dropout,
        }
        for f in (t.backward, torch.autograd.backward, torch.autograd.grad):
            self._handlers[f] = functools.partial(self._backward, f)

    # --- labels ---------------------------------------------------------------------
    def _label(self, x: torch.Tensor) -> int | None:
        return self.state.label(x) if x.is_meta else None

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
        if index is None:
            index = self.state.current
        if not 0 <= index < len(self.state.devices):
            raise invalid_ordinal(index, len(self.state.devices))
        return index

    @contextmanager
    def _on(self, label: int | None, *, explicit: bool = False) -> Iterator[None]:
        d = self.dispatch
        saved = d.target, d.explicit
        d.target = label
        if explicit:
            d.explicit = label
        try:
            yield
        finally:
            d.target, d.explicit = saved

    # --- the entry point ------------------------------------------------------------
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        handler = self._handlers.get(func)
        if handler is not None:
            return handler(*args, **kwargs)
        device = kwargs.get("device")
        if device is not None:
            label = self.resolve(device)
            if label is not None:
                kwargs = {**kwargs, "device": _META}
                with self._on(label, explicit=True):
                    return func(*args, **kwargs)
        if self.autocast_cache and not torch.is_autocast_enabled("cuda"):
            self.autocast_cache.clear()
        label = None
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_meta:
                label = self.state.label(a)
                if label is not None:
                    break
        if label is None:
            return func(*args, **kwargs)
        if torch.is_autocast_enabled("cuda"):
            args, kwargs = _autocast.cast(func, args, kwargs, self.autocast_cache)
        with self._on(label):
            return func(*args, **kwargs)

    # --- moving data ------------------------------------------------------------------
    def _to_method(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        copy = bool(kwargs.pop("copy", False))
        if args and isinstance(args[0], torch.Tensor):
            other = args[0]
            device: Any = self._device(other)
            dtype = other.dtype
            non_blocking = bool(args[1]) if len(args) > 1 else kwargs.get("non_blocking", False)
            fmt = torch.preserve_format
        else:
            if args and isinstance(args[0], int) and not isinstance(args[0], bool):
                args = (torch.device("cuda", args[0]), *args[1:])
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
                    device=device,
                    dtype=dtype,
                    non_blocking=non_blocking,
                    copy=copy,
                    memory_format=fmt,
                )
            with self._on(src):
                return x.to(dtype=out_dtype, copy=copy, memory_format=fmt)
        nbytes = x.numel() * torch.empty((), dtype=out_dtype).element_size()
        if dst is not None and src is None:
            if x.is_meta:
                raise NotImplementedError(
                    "Cannot copy out of meta tensor; no data! Please consider using "
                    "torch.nn.Module.to_empty() instead of torch.nn.Module.to() when moving "
                    "module from meta to a different device."
                )
            state.transfer("h2d", nbytes)

            def make_h2d() -> torch.Tensor:
                with self._on(dst, explicit=True):
                    return torch.empty_like(x, dtype=out_dtype, device=_META, memory_format=fmt)

            def back_h2d(g: torch.Tensor) -> torch.Tensor:
                return torch.zeros(x.shape, dtype=x.dtype)

            return self._apply(x, make_h2d, back_h2d)
        if dst is None:  # from a simulated GPU to the host (or to the meta device)
            target = torch.device(device)
            if target.type == "meta":
                return torch.empty_like(x, dtype=out_dtype, device=_META, memory_format=fmt)
            state.transfer("d2h", nbytes)
            if not non_blocking:
                state.record_sync("to cpu")
            shape = x.shape

            def make_d2h() -> torch.Tensor:
                return torch.zeros(shape, dtype=out_dtype, device=target)

            def back_d2h(g: torch.Tensor) -> torch.Tensor:
                with self._on(src, explicit=True):
                    return torch.zeros(shape, dtype=x.dtype, device=_META)

            return self._apply(x, make_d2h, back_d2h)
        state.transfer("d2d", nbytes)

        def make_d2d() -> torch.Tensor:
            with self._on(dst, explicit=True):
                return torch.empty_like(x, dtype=out_dtype, device=_META, memory_format=fmt)

        def back_d2d(g: torch.Tensor) -> torch.Tensor:
            with self._on(src, explicit=True):
                return torch.empty_like(g, dtype=x.dtype, device=_META)

        return self._apply(x, make_d2d, back_d2d)

    @staticmethod
    def _apply(
        x: torch.Tensor, make: Callable[[], torch.Tensor], back: Callable[..., torch.Tensor]
    ) -> torch.Tensor:
        if x.requires_grad and torch.is_grad_enabled():
            return _Mover.apply(x, make, back)
        return make()

    # --- values that would need the GPU's data -----------------------------------------
    def _read(self, x: torch.Tensor, kind: str) -> None:
        self.state.record_sync(kind)
        self.state.transfer("d2h", x.numel() * x.element_size())

    def _item(self, x: torch.Tensor) -> Any:
        if self._label(x) is None:
            return x.item()
        if x.numel() != 1:
            raise RuntimeError(f"a Tensor with {x.numel()} elements cannot be converted to Scalar")
        self._read(x, "item")
        return placeholder_scalar(x.dtype)

    def _tolist(self, x: torch.Tensor) -> Any:
        if self._label(x) is None:
            return x.tolist()
        self._read(x, "tolist")
        return torch.zeros(x.shape, dtype=x.dtype).tolist()

    def _bool(self, x: torch.Tensor) -> bool:
        if self._label(x) is None:
            return bool(x)
        if x.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        self._read(x, "bool")
        return False

    def _numpy(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        label = self._label(x)
        if label is None:
            return x.numpy(*args, **kwargs) if not args else x.__array__(*args, **kwargs)
        raise TypeError(
            f"can't convert cuda:{label} device type tensor to numpy. Use Tensor.cpu() to "
            "copy the tensor to host memory first."
        )

    def _repr(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> str:
        label = self._label(x)
        if label is None:
            return _T.__repr__(x, *args, **kwargs)
        self._read(x, "print")
        shown = torch.zeros((), dtype=x.dtype).expand(x.shape)
        text = _T.__repr__(shown)
        suffix = f", device='cuda:{label}'"
        if x.grad_fn is not None:
            suffix += f", grad_fn=<{type(x.grad_fn).__name__}>"
        elif x.requires_grad:
            suffix += ", requires_grad=True"
        return text[:-1] + suffix + ")"

    def _format(self, x: torch.Tensor, spec: str) -> str:
        if self._label(x) is None:
            return _T.__format__(x, spec)
        if x.dim() == 0:
            return format(self._item(x), spec)
        if spec:
            raise TypeError("unsupported format string passed to Tensor.__format__")
        return self._repr(x)

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
        label = self._label(query)
        if label is not None:
            if torch.is_autocast_enabled("cuda"):
                (query, key, value), _ = _autocast.cast_to(
                    (query, key, value), torch.get_autocast_dtype("cuda"), self.autocast_cache
                )
            out = self._fused_sdpa(label, query, key, value, attn_mask, dropout_p, is_causal, scale)
            if out is not None:
                return out
            self.state.note("scaled_dot_product_attention: math kernel (as on the GPU)")
        with self._on(label):
            return F.scaled_dot_product_attention(
                query,
                key,
                value,
                attn_mask,
                dropout_p,
                is_causal,
                scale=scale,
                enable_gqa=enable_gqa,
            )

    def _fused_sdpa(
        self,
        label: int,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None,
        dropout_p: float,
        is_causal: bool,
        scale: float | None,
    ) -> torch.Tensor | None:
        """The flash or memory-efficient kernel where CUDA would pick one, else None."""
        spec = self.state.devices[label].spec
        major = spec.compute_capability[0] if spec.compute_capability else 0
        if query.dim() != 4 or query.shape[1] != key.shape[1] or query.shape[-1] % 8:
            return None
        needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
        with self._on(label):
            if (
                torch.backends.cuda.flash_sdp_enabled()
                and attn_mask is None
                and query.dtype in (torch.float16, torch.bfloat16)
                and query.shape[-1] <= 256
                and major >= 8
            ):
                self.state.note("scaled_dot_product_attention: flash kernel (as on the GPU)")
                return _aten._scaled_dot_product_flash_attention(
                    query, key, value, dropout_p, is_causal, scale=scale
                )[0]
            if torch.backends.cuda.mem_efficient_sdp_enabled() and major >= 5:
                bias = attn_mask
                if bias is not None and bias.dtype == torch.bool:
                    bias = torch.zeros(bias.shape, dtype=query.dtype, device=_META).masked_fill(
                        bias.logical_not(), float("-inf")
                    )
                self.state.note(
                    "scaled_dot_product_attention: memory-efficient kernel (as on the GPU)"
                )
                return _aten._scaled_dot_product_efficient_attention(
                    query, key, value, bias, needs_grad, dropout_p, is_causal, scale=scale
                )[0]
        return None

    def _dropout(
        self, input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
    ) -> torch.Tensor:
        """CUDA's fused dropout keeps a bool mask; the CPU path (which meta tensors would
        take) keeps one in the input's dtype (aten/src/ATen/native/Dropout.cpp)."""
        label = self._label(input)
        if label is None or inplace or not training or not 0 < p < 1 or input.numel() == 0:
            return F.dropout(input, p, training, inplace)
        with self._on(label):
            return torch.native_dropout(input, p, True)[0]

    def _backward(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        label = None
        for t in _tensors((args, kwargs)):
            label = self._label(t)
            if label is not None:
                break
        saved = self.state.phase
        self.state.phase = "backward"
        try:
            with self._on(label):
                return func(*args, **kwargs)
        finally:
            self.state.phase = saved
