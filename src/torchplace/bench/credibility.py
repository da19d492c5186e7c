"""Which measured rows to believe: a busy machine makes absurd ones.

On a machine whose cores are shared (load average 12 on 2 cores), a timed block can wait
for the CPU longer than it computes, and a peak measured in such a moment is too low. The
rows that follow said "21,398% of peak" and "618,805× speed-up" with only a note at the
bottom. A measured row is not credible when:

- its spread is large: the interquartile range is more than half the median (the blocks
  disagree, so the median is one draw among very different ones);
- it took more than 10× what the roofline gives for this machine's peaks, measured in the
  same run (the CPU's rows): real kernels take 1.1–2.8× the roofline on this project's machine
  (``benchmarks/validate_cost_model.py``, docs/bench.md), so 10× is time the process spent
  waiting, not computing;
- it achieved more than 10× the peak it is compared with: a CPU's caches beat the DRAM
  copy test by about an order of magnitude at most, and no GPU beats its datasheet, so the
  peak (or the clock) was disturbed.

Such a row keeps its time, marked; its % of peak is not shown, and the speed-ups that
divide by it are withheld (``None``), so no break-even size is drawn from it.

Examples:
    >>> from torchplace.bench.credibility import doubt
    >>> doubt(seconds=0.0691, iqr_seconds=0.008, predicted_seconds=0.00037, peak_fraction=None)
    "187× the roofline's time for this machine's measured peaks: the process was waiting"
    >>> doubt(seconds=1e-3, iqr_seconds=1e-4, predicted_seconds=6e-4, peak_fraction=0.8) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence

from torchplace.bench.results import Row

__all__ = ["NOISY_SPREAD", "TOO_FAST", "TOO_SLOW", "doubt", "mark"]

NOISY_SPREAD = 0.5  # IQR / median
TOO_SLOW = 10.0  # measured / roofline
TOO_FAST = 10.0  # achieved / peak


def doubt(
    *,
    seconds: float,
    iqr_seconds: float | None,
    predicted_seconds: float | None,
    peak_fraction: float | None,
    measured_peaks: bool = True,
) -> str | None:
    """Why a measurement is not credible (see the module docstring), or None.
    ``measured_peaks``: the roofline's peaks were measured on this machine in the same run
    (the CPU's): only then does a time far beyond it say the process was waiting."""
    if iqr_seconds is not None and seconds > 0 and iqr_seconds > NOISY_SPREAD * seconds:
        return f"noisy: the spread (IQR) is {iqr_seconds / seconds:.0%} of the median"
    if measured_peaks and predicted_seconds and seconds > TOO_SLOW * predicted_seconds:
        return (
            f"{seconds / predicted_seconds:,.0f}× the roofline's time for this machine's "
            "measured peaks: the process was waiting"
        )
    if peak_fraction is not None and peak_fraction > TOO_FAST:
        return f"{peak_fraction:,.0%} of the peak: the peak was measured while disturbed"
    return None


def mark(rows: Sequence[Row]) -> None:
    """Set ``doubt`` on measured rows that are not credible, and withhold the speed-ups
    of rows compared with a CPU row that is not (call after the speed-ups are attached)."""
    for r in rows:
        if not r.projected:
            r.doubt = doubt(
                seconds=r.seconds,
                iqr_seconds=r.iqr_seconds,
                predicted_seconds=r.predicted_seconds,
                peak_fraction=r.peak_fraction,
                measured_peaks=r.peak_source == "measured",
            )
    doubtful_cpu = {(r.op, r.size, r.dtype) for r in rows if r.device == "cpu" and r.doubt}
    for r in rows:
        compared = r.speedup is not None or r.speedup_with_transfer is not None
        if r.device != "cpu" and compared and (r.doubt or (r.op, r.size, r.dtype) in doubtful_cpu):
            r.speedup = r.speedup_with_transfer = None
            r.doubt = r.doubt or "speed-up withheld: the CPU time it divides is not credible"
