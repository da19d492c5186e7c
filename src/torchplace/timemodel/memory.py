"""Memory-bound kernels and convolutions.

A kernel that does no counted FLOPs (elementwise, reductions, normalisation, copies,
indexing, optimizer updates) streams its bytes at the *achievable* bandwidth
(``memory.efficiency`` of the datasheet figure) and pays the per-kernel overhead once per
launch. Multi-tensor kernels (``_foreach_*``, the fused optimizers) launch once per chunk
of tensors, as ATen's ``multi_tensor_apply`` does (aten/src/ATen/native/cuda/
MultiTensorApply.cuh: at most 110, 64, 48, 36 or 30 tensors per launch for 1 to 5 lists,
and 320 blocks of 65536 elements).

A convolution is an implicit GEMM (cuDNN's and CUTLASS's convolution kernels): the forward
pass ``M = N·H_out·W_out``, ``N = C_out/groups``, ``K = C_in/groups · kh · kw``; the data
gradient ``M = N·H·W``, ``N = C_in/groups``, ``K = C_out/groups · kh · kw``; the weight
gradient ``M = C_out/groups``, ``N = C_in/groups · kh · kw``, ``K = N·H_out·W_out`` (a long
K, which split-K spreads over the GPU). Depthwise and other thin-group convolutions
(fewer than 8 channels a group) run as memory-bound kernels. Tensor-core convolutions
(fp16, bf16, TF32) work on channels-last data: with a contiguous (NCHW) input, cuDNN
transposes the activations in and out (NVIDIA Deep Learning Performance guide,
"Convolutional Layers User's Guide": NHWC is the layout Tensor Core convolutions use; NCHW
data is transposed first), priced here as an extra read and write of each activation
tensor. Float32 3×3 stride-1 convolutions without TF32 run cuDNN's Winograd algorithm,
2.25× fewer multiplications than the GEMM.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from torchplace.timemodel.gemm import gemm_seconds

if TYPE_CHECKING:
    from torchplace.timemodel.device import DeviceModel

__all__ = ["convolution_seconds", "launches", "memory_seconds"]

_MAX_TENSORS = (110, 64, 48, 36, 30)  # MultiTensorApply.cuh depth_to_max_tensors
# cuDNN's Winograd convolution (CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD) computes F(2×2, 3×3):
# 16 multiplications where a direct 3×3 convolution makes 36 (Lavin & Gray, "Fast
# Algorithms for Convolutional Neural Networks", CVPR 2016), 2.25× fewer. cuDNN uses it
# for float32 3×3 stride-1 convolutions on the SIMT units; tensor-core convolutions are
# implicit GEMMs.
_WINOGRAD = 36 / 16
_MAX_BLOCKS = 320  # depth_to_max_blocks
_CHUNK = 65536  # kChunkSize


def launches(tensors: int, depth: int, elements: int) -> int:
    """Kernel launches of one multi-tensor operation over ``tensors`` tensors in ``depth``
    lists (``elements`` in each list together).

    Examples:
        >>> launches(161, 3, 25_557_032)  # SGD with momentum: parameters, grads, buffers
        4
    """
    if tensors <= 0:
        return 0
    per = _MAX_TENSORS[min(max(depth, 1), len(_MAX_TENSORS)) - 1]
    chunks = math.ceil(elements / _CHUNK) + tensors  # a partial chunk per tensor at most
    return max(math.ceil(tensors / per), math.ceil(chunks / _MAX_BLOCKS))


def memory_seconds(device: DeviceModel, nbytes: float, kernels: int = 1) -> tuple[float, str]:
    """Seconds to stream ``nbytes`` in ``kernels`` launches, and the bound."""
    stream = nbytes / device.achievable_bandwidth
    overhead = kernels * device.kernel_overhead
    return stream + overhead, "memory" if stream >= overhead else "launch"


def convolution_seconds(device: DeviceModel, sig: tuple[Any, ...]) -> tuple[float, str]:
    """Seconds of a convolution signature (see :func:`torchplace.timemodel.kernels`):
    ``("conv", passes, precision, channels_last, n, c_in, h, w, c_out, kh, kw, h_out,
    w_out, groups, nbytes, activation_bytes)``, ``passes`` a string of ``f`` (forward),
    ``d`` (data gradient) and ``w`` (weight gradient)."""
    (_, passes, precision, channels_last, n, c_in, h, w, c_out, kh, kw, h_out, w_out,
     groups, nbytes, activation_bytes) = sig  # fmt: skip
    cin_g, cout_g = c_in // groups, c_out // groups
    if min(cin_g, cout_g) < 8 and groups > 1:  # depthwise: no GEMM to speak of
        return memory_seconds(device, nbytes, len(passes))
    efficiency = device.params["gemm.convolution_efficiency"]
    share = nbytes / max(len(passes), 1)
    total = 0.0
    bounds: dict[str, float] = {}
    gemms = {
        "f": (n * h_out * w_out, cout_g, cin_g * kh * kw),
        "d": (n * h * w, cin_g, cout_g * kh * kw),
        "w": (cout_g, cin_g * kh * kw, n * h_out * w_out),
    }
    # float32 without TF32, or TF32 where the GPU's TF32 tensor rate is no faster than its
    # float32 rate (GeForce Ampere and Ada: the catalog's tf32 equals fp32), where cuDNN's
    # heuristics have no reason to leave the SIMT kernels: no transposes, Winograd
    simt = (
        precision not in device.flops
        or precision in ("fp32", "fp64")
        or (precision == "tf32" and device.flops["tf32"] <= device.flops["fp32"])
    )
    winograd = simt and kh * kw == 9 and h_out * w_out == h * w  # 3×3, stride 1
    for p in passes:
        m, nn, k = gemms[p]
        factor = efficiency * (_WINOGRAD if winograd and p in "fd" else 1.0)
        seconds, bound = gemm_seconds(device, m, nn, k, groups, precision, share, efficiency=factor)
        total += seconds
        bounds[bound] = bounds.get(bound, 0.0) + seconds
    if not channels_last and not simt:
        # NCHW in, NCHW out: each activation tensor transposed (read and written) once more
        transpose, _ = memory_seconds(device, 2 * activation_bytes, len(passes))
        total += transpose
        bounds["memory"] = bounds.get("memory", 0.0) + transpose
    return total, max(bounds.items(), key=lambda kv: kv[1])[0]
