"""CUDA kernels that refuse tensors past 32-bit indexing, as their ATen source does.

Most of ATen's CUDA kernels split a large tensor into pieces 32-bit indices can address
(TensorIterator's ``with_32bit_indexing``, ``canUse32BitIndexMath``) or index with 64 bits,
so a tensor of more than 2**31 - 1 elements works. A few count their threads in an
``int32_t`` and check first; on a simulated GPU these refuse the same tensors with the same
error, before any memory is taken. Each entry cites its check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["LIMITS", "check"]

_INT32_MAX = 2**31 - 1


def _avg_pool2d_output(args: Any, kwargs: Any) -> int:
    # aten/src/ATen/native/cuda/AveragePool2d.cu avg_pool2d_out_cuda_template:
    # `const int32_t count = safe_downcast<int32_t, int64_t>(output.numel());`
    # The count is taken before the kernel's dtype switch (AT_DISPATCH_FLOATING_TYPES_AND2,
    # which an empty output never reaches: CUDA's host code ran an empty uint8 avg_pool1d,
    # benchmarks/data/opinfo-cuda-*.json.gz), so the shape comes from the meta function in
    # a dtype it accepts: torch's Python meta_avg_pool2d (torch/_meta_registrations.py)
    # refuses unsigned integers as the CPU kernel does; CUDA's dtype refusal is the
    # generated table's (sim/rules/_cuda_ops.py), checked before this
    meta = [
        torch.empty_like(a, device="meta", dtype=torch.float32)
        if isinstance(a, torch.Tensor)
        else a
        for a in args
    ]
    return int(torch.ops.aten.avg_pool2d.default(*meta, **kwargs).numel())


def _avg_pool2d_grad_input(args: Any, kwargs: Any) -> int:
    # avg_pool2d_backward_out_cuda_template:
    # `const int32_t count = safe_downcast<int32_t, int64_t>(input.numel());`
    return int(args[1].numel())


#: aten op -> the element count its CUDA kernel downcasts to int32
LIMITS: dict[str, Callable[[Any, Any], int]] = {
    "aten::avg_pool2d": _avg_pool2d_output,
    "aten::avg_pool2d_backward": _avg_pool2d_grad_input,
}


def check(name: str, args: Any, kwargs: Any) -> None:
    """Raise ATen's error if op ``name``'s CUDA kernel cannot index these tensors."""
    count = LIMITS[name](args, kwargs)
    if count > _INT32_MAX:
        # safe_downcast (aten/src/ATen/native/Pool.h): TORCH_CHECK(..., "integer out of range")
        raise RuntimeError("integer out of range")
