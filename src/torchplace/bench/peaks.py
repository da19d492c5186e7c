"""Peak figures to compare against: measured for the CPU, from the catalog for GPUs.

No datasheet gives a CPU's reachable FLOP/s or memory bandwidth in a form PyTorch can
use (it depends on cores, vector units, BLAS and threads), so the CPU's peaks are
*measured* here: FLOP/s by a large matrix multiply per dtype, bandwidth by a copy far
larger than the last-level cache, and the per-operation overhead by a one-element add.
Every report states that these are measured.

Examples:
    >>> from torchplace.bench.peaks import catalog_peaks
    >>> catalog_peaks("no such gpu") is None
    True
"""

from __future__ import annotations

import torch

from torchplace.bench import machine
from torchplace.bench.timing import measure
from torchplace.cost import Peaks

__all__ = ["catalog_peaks", "measure_cpu_peaks"]

_MiB = 1024**2
_CPU = torch.device("cpu")


def _matmul_flops_per_s(n: int, dtype: torch.dtype, runs: int, max_run_time: float) -> float:
    a = torch.randn(n, n, dtype=dtype)
    b = torch.randn(n, n, dtype=dtype)
    t = measure(lambda: a @ b, device=_CPU, min_runs=runs, max_run_time=max_run_time)
    return 2 * n**3 / t.median


def _matmul_probe(dtype: torch.dtype, runs: int, max_run_time: float) -> tuple[float, int]:
    """FLOP/s and side of the largest probe (256 or 2048) that keeps to the time budget.

    A CPU without a native kernel for a dtype (bf16 without AVX512-BF16/AMX, fp16 on most
    CPUs) multiplies 2048×2048 matrices in about a minute; the 256×256 rate says so first.
    """
    rate = _matmul_flops_per_s(256, dtype, runs, max_run_time)
    if 2 * 2048**3 / rate * runs > 4 * max_run_time:
        return rate, 256
    return _matmul_flops_per_s(2048, dtype, runs, max_run_time), 2048


def _copy_bytes_per_s(nbytes: int, runs: int, max_run_time: float) -> float:
    src = torch.ones(nbytes // 4)
    dst = torch.empty_like(src)
    t = measure(lambda: dst.copy_(src), device=_CPU, min_runs=runs, max_run_time=max_run_time)
    return 2 * src.nbytes / t.median  # read once, written once


def _op_overhead_seconds(runs: int, max_run_time: float) -> float:
    a, b = torch.ones(1), torch.ones(1)
    return measure(lambda: a + b, device=_CPU, min_runs=runs, max_run_time=max_run_time).median


def measure_cpu_peaks(*, quick: bool = False) -> Peaks:
    """Measure this CPU's peaks with PyTorch (a few seconds; about 2 with ``quick``).

    - FLOP/s: a 2048×2048 matmul per dtype, or 256×256 where the small one shows that
      the large one would take far longer than the time budget (no native bf16 or fp16
      kernel on this CPU).
    - Bandwidth: ``dst.copy_(src)`` of 512 MiB (128 MiB with ``quick``), counting the
      bytes read and the bytes written, capped at an eighth of the available RAM.
    - Per-operation overhead: ``a + b`` on one-element tensors.

    Args:
        quick: a smaller copy and shorter timing.

    Returns:
        :class:`~torchplace.cost.Peaks` with ``measured=True``.
    """
    runs, budget = (3, 0.3) if quick else (5, 1.0)
    available = machine.free_bytes(_CPU) or 0
    copy_bytes = max(16 * _MiB, min((128 if quick else 512) * _MiB, available // 8))
    probes = {
        name: _matmul_probe(dtype, runs, budget)
        for name, dtype in (
            ("fp32", torch.float32),
            ("bf16", torch.bfloat16),
            ("fp16", torch.float16),
        )
    }
    flops = {name: rate for name, (rate, _) in probes.items()}
    sides = ", ".join(f"{name} {n}×{n}" for name, (_, n) in probes.items())
    gib = copy_bytes / 1024**3
    return Peaks(
        name=machine.device_name(_CPU),
        flops_per_s=flops,
        bandwidth_bytes_per_s=_copy_bytes_per_s(copy_bytes, runs, budget),
        host_bandwidth_bytes_per_s=None,
        launch_seconds=_op_overhead_seconds(runs, budget),
        measured=True,
        source=(
            f"measured here with {torch.get_num_threads()} threads: matmul {sides}; "
            f"copy of {gib:.3g} GiB; one-element add"
        ),
        memory_bytes=available,
    )


def catalog_peaks(name: str) -> Peaks | None:
    """The catalog's datasheet peaks for a GPU name, or ``None`` if it is not listed."""
    from torchplace import catalog

    try:
        return Peaks.from_spec(catalog.lookup(name))
    except ValueError:
        return None
