"""Honest timing: warmed up, synchronised on both sides, many runs, median and IQR.

The tutorials' ``t = time.time(); c = a * b; print(time.time() - t)`` on CUDA tensors
times the kernel *launch*, not the kernel: CUDA runs asynchronously, so the clock stops
before the GPU has done the work. It also times the first call, which pays for CUDA
initialisation, kernel loading and allocator growth. :func:`measure` follows
``torch.utils.benchmark.Timer``'s method (untimed warm-up, blocks of back-to-back calls
sized so the clock's own cost is negligible, the garbage collector off while timing,
repeat until the interquartile range is small) and in addition waits for the device
before it reads the clock on both sides of every block, and always times at least
``min_runs`` blocks, however slow the call.

The device wait and the clock are two small seams (``_synchronize``, ``_clock``) so that
tests can check the protocol with a fake device and a fake clock.

Examples:
    >>> import torch
    >>> from torchplace.bench.timing import measure
    >>> a = torch.ones(1000)
    >>> t = measure(lambda: a * 2, device=torch.device("cpu"), max_run_time=0.1)
    >>> 0 < t.median < 0.01 and t.runs >= 5
    True
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Timing", "measure"]


@dataclass(frozen=True)
class Timing:
    """The result of :func:`measure`.

    Attributes:
        median: median seconds per call.
        iqr: interquartile range of seconds per call (the spread).
        runs: timed blocks, each of ``number_per_run`` back-to-back calls.
        number_per_run: calls per timed block.
    """

    median: float
    iqr: float
    runs: int
    number_per_run: int


def _synchronize(device: torch.device) -> None:
    """Wait until ``device`` has finished all queued work (nothing to wait for on CPU)."""
    if device.type in ("cpu", "meta"):
        return
    torch.accelerator.synchronize(device)


def _clock() -> float:
    return time.perf_counter()


def _block(fn: Callable[[], Any], number: int, device: torch.device) -> float:
    """Seconds for ``number`` back-to-back calls, the device idle at both clock reads."""
    _synchronize(device)
    start = _clock()
    for _ in range(number):
        fn()
    _synchronize(device)
    return _clock() - start


def _spread(times: list[float]) -> tuple[float, float]:
    q1, median, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return median, q3 - q1


def measure(
    fn: Callable[[], Any],
    *,
    device: torch.device,
    warmup: int = 1,
    min_runs: int = 5,
    min_run_time: float = 0.01,
    max_run_time: float = 1.0,
    threshold: float = 0.1,
    block_time: float = 1e-3,
) -> Timing:
    """Time ``fn()`` on ``device``.

    ``fn`` is called ``warmup`` times untimed, then once more in a timed but discarded
    block that sizes the blocks (enough calls to last ``block_time``). Blocks are then
    timed until there are at least ``min_runs`` and ``min_run_time`` seconds of them,
    and either IQR / median is below ``threshold`` or ``max_run_time`` is spent.

    Args:
        fn: the work, with its inputs already on ``device``.
        device: where the work runs; it is synchronised before each clock read.
        warmup: untimed calls first.
        min_runs: least number of timed blocks (>= 2).
        min_run_time: least seconds of timed blocks.
        max_run_time: stop after this many seconds of timed blocks, once there are
            ``min_runs`` of them, even if the spread is still large.
        threshold: stop once IQR / median is below this.
        block_time: seconds a block should last at least, so the clock and the
            synchronisation cost little against the work.

    Returns:
        The :class:`Timing`: median and IQR per call.

    Raises:
        ValueError: ``min_runs`` < 2 or ``warmup`` < 0.
    """
    if min_runs < 2 or warmup < 0:
        raise ValueError(f"need min_runs >= 2 and warmup >= 0, got {min_runs} and {warmup}.")
    for _ in range(warmup):
        fn()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        first = _block(fn, 1, device)  # sizes the blocks; not counted
        number = max(1, math.ceil(block_time / first)) if first > 0 else 1000
        times: list[float] = []
        spent = 0.0
        while True:
            seconds = _block(fn, number, device)
            times.append(seconds / number)
            spent += seconds
            if len(times) < min_runs or spent < min_run_time:
                continue
            median, iqr = _spread(times)
            if iqr <= threshold * median or spent >= max_run_time:
                return Timing(median=median, iqr=iqr, runs=len(times), number_per_run=number)
    finally:
        if gc_was_enabled:
            gc.enable()
