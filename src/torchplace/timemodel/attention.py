"""Fused attention kernels: flash, memory-efficient and cuDNN.

The kernel is the one the simulator ran (``aten._scaled_dot_product_flash_attention``,
``..._efficient_attention``, ``..._cudnn_attention`` and their backward): the simulator
calls the kernel the target GPU's ``scaled_dot_product_attention`` picks, so the choice is
read from the operation itself. The math fallback is not a kernel of its own: it is
priced as the matrix products and softmax it runs.

A fused kernel's time is its FLOPs (PyTorch's count, ``torch.utils.flop_counter``, which
counts the full score matrix; a causal mask skips half of it) over the dense tensor-core
peak times the fraction the kernel reaches on that architecture:

- flash (FlashAttention-2): ``attention.flash_forward`` / ``flash_backward`` on Ampere and
  Ada; times ``attention.hopper_factor`` on Hopper and later (it runs Ampere's mma.sync
  there, not Hopper's wgmma);
- memory-efficient (xformers' cutlass kernel): flash's rate times
  ``attention.efficient_forward_factor`` / ``efficient_backward_factor``; on Volta and
  Turing, which have no flash kernel, the same fraction of their fp16 peak;
- cuDNN: flash's rate (NVIDIA publishes no per-architecture figure torchplace could cite).

Each kernel is also bounded by its memory traffic (q, k, v, the output and, backward,
their gradients).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchplace.timemodel.device import DeviceModel

__all__ = ["attention_seconds"]

_LATER_THAN_AMPERE = ("hopper", "blackwell", "cdna3")


def attention_seconds(device: DeviceModel, sig: tuple[Any, ...]) -> tuple[float, str]:
    """Seconds of ``("attn", kernel, backward, flops, causal, precision, nbytes)``."""
    _, kernel, backward, flops, causal, precision, nbytes = sig
    p = device.params
    fraction = p["attention.flash_backward" if backward else "attention.flash_forward"]
    if device.arch in _LATER_THAN_AMPERE:
        fraction *= p["attention.hopper_factor"]
    if kernel == "efficient":
        fraction *= p[
            "attention.efficient_backward_factor"
            if backward
            else "attention.efficient_forward_factor"
        ]
    work = flops * (0.5 if causal else 1.0)
    compute = work / (device.peak(precision) * fraction)
    stream = nbytes / device.achievable_bandwidth
    seconds = max(compute, stream) + device.kernel_overhead
    return seconds, "compute" if compute >= stream else "memory"
