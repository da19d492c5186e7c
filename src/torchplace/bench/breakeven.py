"""Speed-ups over the CPU, and the size below which the CPU wins once copies count.

An accelerator row is compared with the CPU row of the same operation, size and dtype
(a TF32 row with the CPU's fp32 row: the same user code). Its *speed-up with transfer*
counts copying the inputs to the device and the result back, which is what a user who
starts from CPU tensors pays. The break-even size is where that speed-up crosses 1,
interpolated linearly in log(size) and log(speed-up) between the two sizes around it.

Examples:
    >>> from torchplace.bench.breakeven import crossover
    >>> crossover([(10, 0.5), (100, 2.0)])  # interpolated at speed-up 1
    ('crossover', 31.6)
    >>> crossover([(10, 3.0), (100, 4.0)])
    ('accelerator_wins', None)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from torchplace.bench.results import BreakEven, Row
from torchplace.bench.workloads import OPS

__all__ = ["UNITS", "attach_speedups", "break_even", "crossover"]

#: What the sweep variable of each operation counts.
UNITS = {
    "elementwise": "elements per vector",
    "matmul": "matrix side",
    "conv2d": "image side",
}

Status = Literal["crossover", "accelerator_wins", "cpu_wins", "mixed"]


def attach_speedups(rows: Sequence[Row]) -> None:
    """Fill ``speedup`` and ``speedup_with_transfer`` of accelerator rows in place."""
    cpu = {(r.op, r.size, r.dtype): r.seconds for r in rows if r.device == "cpu"}
    for r in rows:
        base = cpu.get((r.op, r.size, r.dtype))
        if r.device == "cpu" or r.op not in OPS or base is None:
            continue
        r.speedup = base / r.seconds
        if r.seconds_with_transfer:
            r.speedup_with_transfer = base / r.seconds_with_transfer


def crossover(points: Sequence[tuple[int, float]]) -> tuple[Status, float | None]:
    """Where the speed-up crosses 1, from ``(size, speed-up)`` pairs in size order.

    Returns:
        ``("crossover", size)`` when the CPU wins below some size and the accelerator
        from there on; ``("accelerator_wins", None)`` / ``("cpu_wins", None)`` when one
        side wins at every size; ``("mixed", size)`` when the winner changes more than
        once (often noise at small sizes), ``size`` being the last crossing if the
        accelerator wins at the largest size, else ``None``. Sizes are rounded to 3
        significant digits.
    """
    wins = [s >= 1.0 for _, s in points]
    if all(wins):
        return "accelerator_wins", None
    if not any(wins):
        return "cpu_wins", None
    last_loss = max(k for k, w in enumerate(wins) if not w)
    monotonic = not any(wins[:last_loss])
    if not wins[-1]:
        return "mixed", None
    (s0, r0), (s1, r1) = points[last_loss], points[last_loss + 1]
    ls0, ls1, lr0, lr1 = math.log(s0), math.log(s1), math.log(r0), math.log(r1)
    size = math.exp(ls0 + (0.0 - lr0) * (ls1 - ls0) / (lr1 - lr0)) if lr1 != lr0 else s1
    return ("crossover" if monotonic else "mixed"), float(f"{size:.3g}")


def break_even(rows: Sequence[Row]) -> list[BreakEven]:
    """One :class:`BreakEven` per accelerator, operation and precision with speed-ups."""
    series: dict[tuple[str, str, str | None, bool], list[Row]] = {}
    for r in rows:
        if r.speedup_with_transfer is not None:
            series.setdefault((r.device, r.op, r.dtype, r.tf32), []).append(r)
    out = []
    for (device, op, dtype, tf32), group in series.items():
        group.sort(key=lambda r: r.size)
        points = [(r.size, r.speedup_with_transfer or 0.0) for r in group]
        status, size = crossover(points)
        out.append(
            BreakEven(
                op=op,
                dtype=dtype,
                tf32=tf32,
                device=device,
                device_name=group[0].device_name,
                projected=group[0].projected,
                status=status,
                size=size,
                unit=UNITS[op],
                smallest=group[0].size,
                largest=group[-1].size,
            )
        )
    return out
