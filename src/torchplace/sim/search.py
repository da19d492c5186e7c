"""The largest size (a batch size, a sequence length) whose run fits a GPU.

:func:`search` doubles the size until a run runs out of memory (or reaches ``high``),
then bisects between the last size that fitted and the first that did not. A size fits
when its run raised no out-of-memory error and its peak reserved memory leaves the safety
margin free (by default 5% of what the caching allocator can reserve: the capacity less
the CUDA context). Each probe is one simulated run — a child process for
``torchplace sim --find-max``, an in-process simulation for :func:`find_max`.

Examples:
    >>> import torch
    >>> from torchplace.sim.search import find_max
    >>> def step(batch: int) -> None:
    ...     torch.empty(batch, 1024**2, dtype=torch.uint8, device="cuda")  # batch MiB
    >>> result = find_max(step, gpu="T4", high=1 << 16)
    >>> 13_000 < result.largest < 14_300  # MiB: a T4's 14.56 GiB, less context and margin
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["FindMaxError", "Probe", "SearchResult", "StopSearch", "find_max", "search"]


class FindMaxError(ValueError):
    """The search cannot answer (the size never reaches the GPU, every run fails, ...)."""


class StopSearch(Exception):
    """Raised by a probe to end the search now (the user interrupted it): :func:`search`
    returns what was measured so far, each result marked ``stopped`` with this message.
    The size being probed is not recorded: its run did not finish."""


@dataclass
class Probe:
    """One run at one size, on one GPU (bytes, seconds)."""

    size: int
    oom: bool
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    limit_bytes: int  # what the allocator may reserve: capacity less the CUDA context
    step_seconds: float | None = None
    error: dict[str, Any] | None = None  # a failure other than out-of-memory
    oom_where: str | None = None

    def fits(self, margin: float) -> bool:
        return (
            not self.oom
            and self.error is None
            and self.peak_reserved_bytes <= (1 - margin) * self.limit_bytes
        )

    @property
    def per_second(self) -> float | None:
        """Samples (or tokens, whatever the size counts) per second, from the estimate."""
        return self.size / self.step_seconds if self.step_seconds else None


@dataclass
class SearchResult:
    """The answer for one GPU, and every probe that led to it."""

    gpu: str
    largest: int | None  # None: not even the smallest size fits
    margin: float
    probes: list[Probe] = field(default_factory=list)
    capped: bool = False  # the largest size tried (high) fitted
    #: why the search ended before its answer (:class:`StopSearch`); ``largest`` is then
    #: the largest size measured that fits, a lower bound, and ``untried_above`` the first
    #: size measured above it that does not (None: none was)
    stopped: str | None = None
    untried_above: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def search(
    probe: Callable[[int], dict[str, Probe]],
    *,
    low: int = 1,
    high: int | None = None,
    margin: float = 0.05,
) -> dict[str, SearchResult]:
    """Find, for every GPU ``probe`` reports on, the largest size in ``[low, high]`` that fits.

    Args:
        probe: runs the workload at a size and returns one :class:`Probe` per GPU key (one
            run can answer for several GPUs: ``torchplace sim --gpu all``).
        low: the smallest size tried.
        high: the largest size tried (None: keep doubling until every GPU runs out).
        margin: the part of the reservable memory that must stay free, in [0, 0.5].

    Raises:
        FindMaxError: ``low``/``high``/``margin`` out of range, the first run fails for a
            reason other than memory, or the size does not change the memory used.
    """
    if low < 1 or (high is not None and high < low):
        raise FindMaxError(f"the sizes must satisfy 1 <= low <= high, got low={low}, high={high}.")
    if not 0 <= margin <= 0.5:
        raise FindMaxError(f"the margin must be between 0 and 0.5 (50%), got {margin}.")
    cache: dict[int, dict[str, Probe]] = {}
    try:
        return _search(probe, cache, low, high, margin)
    except StopSearch as stop:
        return _stopped(cache, margin, str(stop))


def _search(
    probe: Callable[[int], dict[str, Probe]],
    cache: dict[int, dict[str, Probe]],
    low: int,
    high: int | None,
    margin: float,
) -> dict[str, SearchResult]:

    def run(size: int) -> dict[str, Probe]:
        if size not in cache:
            cache[size] = probe(size)
            failed = [p for p in cache[size].values() if p.error]
            if failed and len(cache) == 1:
                e = failed[0].error or {}
                where = f" at {e.get('file')}:{e.get('line')}" if e.get("file") else ""
                raise FindMaxError(
                    f"the run at size {size} failed{where} with {e.get('type')}: "
                    f"{e.get('message')} — fix the script first (the search tries sizes that "
                    "fit or run out of memory, not runs that fail otherwise)."
                )
        return cache[size]

    first = run(low)
    gpus = list(first)
    lo: dict[str, int | None] = {g: low if first[g].fits(margin) else None for g in gpus}
    hi: dict[str, int | None] = {g: None if first[g].fits(margin) else low for g in gpus}
    size = low
    while any(hi[g] is None for g in gpus) and (high is None or size < high):
        size = min(size * 2, high) if high is not None else size * 2
        results = run(size)
        for g in gpus:
            if hi[g] is None:
                if results[g].fits(margin):
                    lo[g] = size
                else:
                    hi[g] = size
        if size >= 2 * low and len(cache) >= 3 and _flat(cache, gpus):
            raise FindMaxError(
                "the size does not reach the GPU: the peak memory is the same at sizes "
                f"{sorted(cache)} — check that the placeholder is where the batch size is "
                "read (an argument or environment variable the script uses)."
            )
        if high is None and size > 1 << 40:
            raise FindMaxError("every size up to 2**40 fits: the size does not reach the GPU.")
    for g in gpus:  # bisection between the last fit and the first out-of-memory
        while lo[g] is not None and hi[g] is not None and hi[g] - lo[g] > 1:  # type: ignore[operator]
            mid = (lo[g] + hi[g]) // 2  # type: ignore[operator]
            if run(mid)[g].fits(margin):
                lo[g] = mid
            else:
                hi[g] = mid
    return {
        g: SearchResult(
            gpu=g,
            largest=lo[g],
            margin=margin,
            probes=[cache[s][g] for s in sorted(cache)],
            capped=hi[g] is None,
        )
        for g in gpus
    }


def _stopped(
    cache: dict[int, dict[str, Probe]], margin: float, why: str
) -> dict[str, SearchResult]:
    """What a stopped search measured, per GPU: the largest size that fitted so far."""
    gpus = list(next(iter(cache.values()))) if cache else []
    results = {}
    for g in gpus:
        probes = [cache[s][g] for s in sorted(cache)]
        fits = [p.size for p in probes if p.fits(margin)]
        largest = max(fits) if fits else None
        above = [p.size for p in probes if not p.fits(margin) and p.size > (largest or 0)]
        results[g] = SearchResult(
            gpu=g,
            largest=largest,
            margin=margin,
            probes=probes,
            stopped=why,
            untried_above=min(above) if above else None,
        )
    return results


def _flat(cache: dict[int, dict[str, Probe]], gpus: Iterable[str]) -> bool:
    g = next(iter(gpus))
    peaks = {cache[s][g].peak_allocated_bytes for s in cache if not cache[s][g].oom}
    return len(peaks) == 1 and len(cache) >= 3


def find_max(
    fn: Callable[[int], Any],
    *,
    gpu: str = "h100-sxm-80gb",
    low: int = 1,
    high: int | None = None,
    margin: float = 0.05,
    gpus: int = 1,
) -> SearchResult:
    """The largest ``size`` for which ``fn(size)`` fits on a simulated ``gpu``.

    Each probe runs ``fn(size)`` inside ``simulate(gpu, values="placeholder")`` (shapes
    only: any size costs no host memory), so ``fn`` builds its model and batch on
    ``"cuda"`` and runs a step. An out-of-memory error in ``fn`` is the answer "too big".

    Args:
        fn: runs one step at a size (a batch size, a sequence length...).
        gpu: the GPU model from the catalog.
        low, high, margin: see :func:`search`.
        gpus: simulated devices (``fn`` may use several).

    Returns:
        The :class:`SearchResult` (``largest`` is None when not even ``low`` fits).
    """
    import torch

    from torchplace import catalog
    from torchplace.sim.emulation._simulate import simulate

    spec = catalog.lookup(gpu)

    def probe(size: int) -> dict[str, Probe]:
        oom = False
        error = None
        with simulate(spec, gpus=gpus, values="placeholder") as report:
            try:
                fn(size)
            except torch.OutOfMemoryError:
                oom = True
            except Exception as e:
                error = {"type": type(e).__name__, "message": str(e), "file": None, "line": None}
        devices = report.devices
        worst = max(devices, key=lambda d: d.peak_reserved_bytes)
        step = worst.estimated_step_seconds or (worst.estimated_total_seconds or None)
        return {
            spec.key: Probe(
                size=size,
                oom=oom,
                peak_allocated_bytes=max(d.peak_allocated_bytes for d in devices),
                peak_reserved_bytes=worst.peak_reserved_bytes,
                limit_bytes=worst.capacity_bytes - worst.context_bytes,
                step_seconds=step,
                error=error,
            )
        }

    return search(probe, low=low, high=high, margin=margin)[spec.key]
