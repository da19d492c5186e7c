"""CUDA autocast, emulated for simulated tensors.

Simulated tensors are ``meta`` tensors, which PyTorch's autocast (keyed by the tensor's
real device) never casts. The simulator applies CUDA autocast's own op lists instead
(https://pytorch.org/docs/stable/amp.html#cuda-op-specific-behavior), at the Python API
level so the casts are recorded by autograd exactly as on the GPU, with autocast's cache
of casted leaf tensors (weights) for the duration of the autocast region.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["cast", "cast_to"]

_LOWER = [
    "__matmul__",
    "__rmatmul__",
    "addbmm",
    "addmm",
    "addmv",
    "addr",
    "baddbmm",
    "bmm",
    "chain_matmul",
    "multi_dot",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "linear",
    "matmul",
    "mm",
    "mv",
    "prelu",
]
_FP32 = [
    "__pow__",
    "__rdiv__",
    "__rpow__",
    "__rtruediv__",
    "acos",
    "asin",
    "binary_cross_entropy_with_logits",
    "cosh",
    "cosine_embedding_loss",
    "cdist",
    "cosine_similarity",
    "cross_entropy",
    "cumprod",
    "cumsum",
    "dist",
    "erfinv",
    "exp",
    "expm1",
    "group_norm",
    "hinge_embedding_loss",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "log",
    "log_softmax",
    "log10",
    "log1p",
    "log2",
    "margin_ranking_loss",
    "mse_loss",
    "multilabel_margin_loss",
    "multi_margin_loss",
    "nll_loss",
    "norm",
    "normalize",
    "pdist",
    "poisson_nll_loss",
    "pow",
    "prod",
    "reciprocal",
    "rsqrt",
    "sinh",
    "smooth_l1_loss",
    "soft_margin_loss",
    "softmax",
    "softmin",
    "softplus",
    "sum",
    "renorm",
    "tan",
    "triplet_margin_loss",
]
_PROMOTE = [
    "addcdiv",
    "addcmul",
    "atan2",
    "bilinear",
    "cross",
    "dot",
    "grid_sample",
    "index_put",
    "scatter_add",
    "tensordot",
]


def _functions(names: list[str]) -> set[Any]:
    found: set[Any] = set()
    for name in names:
        for namespace in (torch, F, torch.Tensor, torch.linalg):
            f = getattr(namespace, name, None)
            if callable(f):
                found.add(f)
    return found


_LOWER_FUNCS = _functions(_LOWER)
_FP32_FUNCS = _functions(_FP32)
_PROMOTE_FUNCS = _functions(_PROMOTE)
_CASTABLE = (torch.float16, torch.bfloat16, torch.float32)


def _cast_one(
    x: Any, dtype: torch.dtype, cache: dict[int, tuple[torch.Tensor, torch.Tensor]]
) -> Any:
    if not isinstance(x, torch.Tensor) or x.dtype not in _CASTABLE or x.dtype == dtype:
        return x
    cacheable = x.is_leaf and x.requires_grad
    if cacheable:
        hit = cache.get(id(x))
        if hit is not None and hit[0] is x and hit[1].dtype == dtype:
            return hit[1]
    casted = x.to(dtype)
    if cacheable:
        cache[id(x)] = (x, casted)
    return casted


def cast_to(
    values: Any, dtype: torch.dtype, cache: dict[int, tuple[torch.Tensor, torch.Tensor]]
) -> tuple[Any, dict[str, Any]]:
    """Cast the floating tensors in a flat sequence (and lists inside it) to ``dtype``."""
    out = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.append(type(v)(_cast_one(e, dtype, cache) for e in v))
        else:
            out.append(_cast_one(v, dtype, cache))
    return tuple(out), {}


def cast(
    func: Any,
    args: Any,
    kwargs: dict[str, Any],
    cache: dict[int, tuple[torch.Tensor, torch.Tensor]],
) -> tuple[Any, dict[str, Any]]:
    """Apply CUDA autocast's rule for ``func`` to its arguments (unchanged if it has none)."""
    if func in _LOWER_FUNCS:
        dtype = torch.get_autocast_dtype("cuda")
    elif func in _FP32_FUNCS:
        dtype = torch.float32
    elif func in _PROMOTE_FUNCS:
        dtypes = [
            a.dtype
            for a in (*args, *kwargs.values())
            if isinstance(a, torch.Tensor) and a.dtype in _CASTABLE
        ]
        if not dtypes:
            return args, kwargs
        dtype = max(dtypes, key=lambda d: torch.finfo(d).bits)
    else:
        return args, kwargs
    new_args, _ = cast_to(args, dtype, cache)
    new_kwargs = {k: _cast_one(v, dtype, cache) for k, v in kwargs.items()}
    return new_args, new_kwargs
