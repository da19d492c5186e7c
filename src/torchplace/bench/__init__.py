"""Honest timing of CPU and accelerators, compared with their peaks and with each other.

- :mod:`~torchplace.bench.timing`: the harness (warm-up, synchronised clock, medians).
- :mod:`~torchplace.bench.workloads`: the operations and their size sweeps.
- :mod:`~torchplace.bench.peaks`: the CPU's peaks, measured; GPUs' from the catalog.
- :mod:`~torchplace.bench.suite`: :func:`run_bench`, measuring and projecting.
- :mod:`~torchplace.bench.breakeven`: speed-ups and break-even sizes.
- :mod:`~torchplace.bench.results`: rows and the versioned JSON document.
- :mod:`~torchplace.bench.report`: rich tables and the plot.

Examples:
    >>> import torch
    >>> from torchplace.bench import measure
    >>> x = torch.ones(256, 256)
    >>> measure(lambda: x @ x, device=torch.device("cpu"), max_run_time=0.1).median > 0
    True
"""

from __future__ import annotations

from torchplace.bench.peaks import catalog_peaks, measure_cpu_peaks
from torchplace.bench.results import SCHEMA_VERSION, BenchResult, BreakEven, Row
from torchplace.bench.suite import run_bench
from torchplace.bench.timing import Timing, measure
from torchplace.bench.workloads import Workload

__all__ = [
    "SCHEMA_VERSION",
    "BenchResult",
    "BreakEven",
    "Row",
    "Timing",
    "Workload",
    "catalog_peaks",
    "measure",
    "measure_cpu_peaks",
    "run_bench",
]
