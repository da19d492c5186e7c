"""A step from the marks the simulator takes: its time, range, bound and throughput.

The simulator marks ``(clock, GPU busy, host, samples, tokens)`` at the start and after
every ``optimizer.step()`` (or, in a script that takes none, at every call of its
outermost module). A step's figures are the medians of the differences between
consecutive marks:

- time: the run's clock (the queue of :class:`torchplace.cost.StepEstimate`);
- bound: ``"host"`` where the host's time per step is at least the GPU's busy time (the
  GPU waits for Python: a faster GPU does not help), else whichever of compute, memory,
  communication and launch took most of the GPU's kernel time;
- range: ``uncertainty.low`` to ``uncertainty.high`` times the time (how far measured steps
  fell from the model's on the fit measurements, benchmarks/timing/fit.py);
- throughput: samples (and tokens, where the outermost module took integer token ids)
  per second.

Examples:
    >>> from torchplace.timemodel.step import summarize
    >>> marks = [(0.0, 0.0, 0.0, 0, 0), (0.1, 0.09, 0.02, 32, 0), (0.2, 0.18, 0.04, 64, 0)]
    >>> s = summarize(marks, [], {"compute": 0.15, "memory": 0.03})
    >>> s["step_seconds"], s["bound"], round(s["samples_per_second"])
    (0.1, 'compute', 320)
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from torchplace.timemodel.params import Params, load

__all__ = ["summarize"]

_KERNEL_BOUNDS = ("compute", "memory", "communication", "launch")


def summarize(
    time_marks: Sequence[Sequence[float]],
    call_marks: Sequence[Sequence[float]],
    seconds_by_bound: Mapping[str, float],
    params: Params | None = None,
) -> dict[str, Any]:
    """Step figures from the marks (see the module docstring); ``{}`` without two marks.

    Returns:
        ``step_seconds``, ``step_range_seconds`` ([low, high]), ``bound``,
        ``gpu_seconds`` and ``host_seconds`` per step, ``samples_per_second`` and
        ``tokens_per_second`` (``None`` where not known), ``steps`` and ``step_kind``
        (``"optimizer step"`` or ``"call"``).
    """
    marks, kind = time_marks, "optimizer step"
    if len(marks) < 2:
        marks, kind = call_marks, "call"
    if len(marks) < 2:
        return {}
    p = params or load()
    deltas = [[b - a for a, b in zip(m0, m1, strict=True)] for m0, m1 in itertools.pairwise(marks)]
    clock, gpu, host, samples, tokens = (statistics.median(d[i] for d in deltas) for i in range(5))
    if host >= gpu and host > 0:
        bound = "host"
    else:
        kernel = {k: v for k, v in seconds_by_bound.items() if k in _KERNEL_BOUNDS}
        bound = max(kernel.items(), key=lambda kv: kv[1])[0] if kernel else "none"
    return {
        "step_seconds": clock,
        "step_range_seconds": [clock * p["uncertainty.low"], clock * p["uncertainty.high"]],
        "bound": bound,
        "gpu_seconds": gpu,
        "host_seconds": host,
        "samples_per_second": samples / clock if samples and clock > 0 else None,
        "tokens_per_second": tokens / clock if tokens and clock > 0 else None,
        "steps": len(deltas),
        "step_kind": kind,
    }
