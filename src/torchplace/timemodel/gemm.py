"""Matrix products on a GPU: tiles, waves, pipeline fill and split-K.

cuBLAS and CUTLASS (and cuDNN's implicit-GEMM convolutions) compute ``C[m, n] = A[m, k] ·
B[k, n]`` in output tiles, one thread block per tile, each block walking the whole of K;
the blocks run in *waves* of one per SM. The time of a product is therefore

    waves × (2 · tile_m · tile_n · (k + k_fill)) / (per-SM rate × tile efficiency)

where ``waves = ceil(tiles / SMs)`` (wave quantisation: 109 tiles on a 108-SM A100 take
two waves), the tiles are ``ceil(m / tile_m) · ceil(n / tile_n)`` (tile quantisation: a
product 129 wide pays for 256 with 128-wide tiles), ``k_fill`` is the pipeline's fill
before the first multiply (small-K products pay it at every tile), and the per-SM rate is
the catalog's dense peak for the precision times the achievable fraction
(``gemm.tensor_core_efficiency``, or ``gemm.simt_efficiency`` for float32 without TF32)
divided by the SM count. Smaller tiles keep fewer operands per multiply in registers:
their efficiency is ``tile_m · tile_n / (tile_m + tile_n)`` relative to a 128×128 tile's
(CUTLASS's default threadblock shape for large products), capped at 1.

A matrix times a vector (``m`` or ``n`` of 1, as in batch-1 decoding) has no tiles:
cuBLAS leaves its tensor-core kernels for SIMT gemv kernels (``gemv2T_kernel_val``,
``gemvx::kernel`` in published decoding profiles), bounded by the matrix's bytes.

Like cuBLAS's heuristics, the tile shape and the split of K (split-K: several blocks
share one output tile's K and add their partial results, when the output tiles alone
cannot fill the GPU) are chosen to minimise the time. The product is also bounded by its
memory traffic (operands read, result written; and split-K's partial results): skinny
products (a matrix times a vector, as in decoding) are memory-bound.

Examples:
    >>> from torchplace import catalog
    >>> from torchplace.timemodel.device import DeviceModel
    >>> a100 = DeviceModel.from_spec(catalog.lookup("A100"))
    >>> big, _ = gemm_seconds(a100, 8192, 8192, 8192, 1, "bf16", 3 * 8192 * 8192 * 2)
    >>> reached = 2 * 8192**3 / big  # FLOP/s: the fitted fraction of the 312 TFLOP/s peak
    >>> 0.9 < reached / (312e12 * a100.params["gemm.tensor_core_efficiency"]) <= 1
    True
    >>> skinny, bound = gemm_seconds(a100, 1, 4096, 4096, 1, "bf16", 4096 * 4096 * 2)
    >>> bound
    'memory'
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchplace.timemodel.device import DeviceModel

__all__ = ["TILES", "gemm_seconds"]

#: Threadblock tile shapes (m, n) cuBLAS and CUTLASS pick among for tensor-core products
#: (CUTLASS's default_gemm_configuration and the cuBLAS kernel names seen in profiles:
#: ``..._256x128_...``, ``..._128x128_...``, ``..._64x64_...``).
TILES = ((256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64), (32, 128),
         (128, 32), (16, 128), (128, 16))  # fmt: skip
_SPLITS = (1, 2, 3, 4, 6, 8, 12, 16)
_REFERENCE_INTENSITY = 128 * 128 / (128 + 128)


def _tile_efficiency(tm: int, tn: int) -> float:
    return min(1.0, tm * tn / (tm + tn) / _REFERENCE_INTENSITY)


def gemm_seconds(
    device: DeviceModel,
    m: int,
    n: int,
    k: int,
    batch: int,
    precision: str,
    nbytes: float,
    *,
    efficiency: float = 1.0,
) -> tuple[float, str]:
    """Seconds for ``batch`` products of ``[m, k] · [k, n]`` in ``precision`` on ``device``,
    and the bound (``"compute"`` or ``"memory"``), kernel overhead included.

    Args:
        device: the GPU.
        m, n, k: the product's dimensions.
        batch: independent products computed by the same kernel (``bmm``, groups).
        precision: ``"fp32"``, ``"tf32"``, ``"bf16"``, ``"fp16"``, ``"fp8"`` or ``"fp64"``.
        nbytes: the bytes the product reads and writes (its memory bound).
        efficiency: a further factor on the compute rate (cuDNN's convolutions).
    """
    overhead = device.kernel_overhead
    if m <= 0 or n <= 0 or batch <= 0:
        return overhead, "launch"
    memory = nbytes / device.achievable_bandwidth
    if k <= 0:  # an empty sum: the output is written (zeros, or beta * C)
        return memory + overhead, "memory"
    if m == 1 or n == 1:  # a matrix times a vector: cuBLAS's SIMT gemv kernels, no tiles
        compute = (
            2.0 * m * n * k * batch / (device.peak("fp32") * device.params["gemm.simt_efficiency"])
        )
        return max(compute, memory) + overhead, "compute" if compute > memory else "memory"
    rate_per_sm = device.gemm_rate(precision) * efficiency / device.sms
    element = 4 if precision in ("fp32", "tf32") else 2 if precision != "fp64" else 8
    k_fill = device.params["gemm.k_fill"]
    best = math.inf
    best_compute = 0.0
    for tm, tn in TILES:
        tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
        per_tile = 2.0 * tm * tn / (rate_per_sm * _tile_efficiency(tm, tn))
        for split in _SPLITS:
            if split > 1 and (tiles * split > 2 * device.sms or k / split < 2 * k_fill):
                break
            waves = math.ceil(tiles * split / device.sms)
            compute = waves * per_tile * (math.ceil(k / split) + k_fill)
            traffic = memory
            if split > 1:  # partial results written and read back in float32, then reduced
                traffic += (2 * split + 1) * m * n * batch * 4 / device.achievable_bandwidth
                traffic -= m * n * batch * element / device.achievable_bandwidth
            t = max(compute, traffic)
            if t < best:
                best, best_compute = t, compute
    bound = "compute" if best_compute >= best else "memory"
    return best + overhead, bound
