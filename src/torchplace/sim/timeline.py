"""The memory timeline of a simulated GPU, derived from the run's allocation trace.

The trace (:mod:`torchplace.sim.accounting._trace`) already holds every allocation, free and segment
event in order; this module sweeps it once per device and keeps, for display, a few
thousand points: the running bytes allocated per category (each block rounded as the
caching allocator rounds it, so the curve's top is ``torch.cuda.memory_allocated()``) and
the bytes reserved in segments. Down-sampling keeps the lowest and the highest point of
each bucket of events, and so always the exact peak. What was live at the peak — by
category, activations by module, the largest blocks with the line that made them — is
read from the same sweep.

The result is plain JSON (lists, dicts, numbers): it goes in the report
(:attr:`~torchplace.sim.report.SimReport.timelines`), from which the HTML page and the PNG
are drawn.

Examples:
    >>> import torch, torchplace
    >>> from torchplace.sim.timeline import timeline
    >>> with torchplace.simulate("H100", values="placeholder") as report:
    ...     x = torch.empty(1000, device="cuda")
    ...     y = torch.empty(3000, device="cuda")
    ...     del x
    >>> t = timeline(report.state, 0)
    >>> t["peak"]["allocated_bytes"] == report.device(0).peak_allocated_bytes == 16384
    True
    >>> t["total"], t["reserved"][-1]  # the first event reserves a 2 MiB segment
    ([0, 4096, 16384, 12288], 2097152)
"""

from __future__ import annotations

import heapq
from array import array
from typing import TYPE_CHECKING, Any

from torchplace.sim.accounting._trace import CATEGORY_NAMES
from torchplace.sim.allocator import round_size

if TYPE_CHECKING:
    from pathlib import Path

    from torchplace.sim.accounting._state import SimState
    from torchplace.sim.report import SimReport

__all__ = ["COLOURS", "MAX_POINTS", "live_at_peak", "plot", "sections", "timeline", "unit"]

#: points kept per device for display (a 1280-pixel-wide chart shows no more)
MAX_POINTS = 2000
_TOP_MODULES = 3  # activations by module shown at each point
_LARGEST = 10  # blocks listed at the peak
_NO_SCOPE = "(backward)"  # activations made outside any module's forward (as the report says)


def _events(state: SimState, device: int) -> list[tuple[int, int, int]]:
    """(seq, kind, index) in order: kind 0 alloc, 1 free (index into the trace's
    allocations), 2 segment reserved, 3 segment released (index: the size)."""
    trace = state.trace
    events: list[tuple[int, int, int]] = []
    for i in range(len(trace)):
        if trace.device[i] != device:
            continue
        events.append((trace.start[i], 0, i))
        if trace.end[i] >= 0:
            events.append((trace.end[i], 1, i))
    for seq, dev, kind, _, size, _ in trace.segments:
        if dev == device:
            events.append((seq, 2 if kind == "segment_alloc" else 3, size))
    events.sort()
    return events


def _choose(totals: array, max_points: int) -> list[int]:
    """Indices to keep: the first and last event, and each bucket's lowest and highest."""
    n = len(totals)
    if n <= max_points:
        return list(range(n))
    buckets = max(1, (max_points - 2) // 2)
    keep = {0, n - 1}
    for b in range(buckets):
        lo, hi = b * n // buckets, (b + 1) * n // buckets
        if lo >= hi:
            continue
        chunk = totals[lo:hi]
        keep.add(lo + chunk.index(min(chunk)))
        keep.add(lo + chunk.index(max(chunk)))
    return sorted(keep)


def timeline(state: SimState, device: int, *, max_points: int = MAX_POINTS) -> dict[str, Any]:
    """The memory timeline of simulated ``cuda:device`` (bytes; see the module docstring).

    Returns:
        A dict of columns, one entry per kept point: ``seq`` (the event's place in the
        run, shared by all devices), ``seconds`` (the cost model's clock), ``reserved``,
        ``total`` (allocated), ``allocated`` (category -> bytes, only the categories that
        held memory), ``modules`` (the largest activations by module: [[name index,
        bytes], ...], names in ``module_names``); and ``steps`` (seq of each
        ``optimizer.step()``), ``ooms``, ``peak``, ``events`` (how many there were) and
        ``truncated`` (the trace stopped growing: the timeline ends early).
    """
    state.sync()
    trace = state.trace
    events = _events(state, device)
    category = [trace.category_of(i) for i in range(len(trace))]
    size = [round_size(s) for s in trace.size]

    # pass 1: allocated after each event, to choose the points to keep
    totals = array("q")
    total = 0
    for _, kind, i in events:
        if kind == 0:
            total += size[i]
        elif kind == 1:
            total -= size[i]
        totals.append(total)
    keep = _choose(totals, max_points)
    peak_at = totals.index(max(totals)) if totals else -1

    # pass 2: categories, reserved, live activations by module and the live set, at the kept
    by_cat = dict.fromkeys(CATEGORY_NAMES, 0)
    modules: dict[str, int] = {}
    live: set[int] = set()
    reserved = 0
    out: dict[str, list[Any]] = {"seq": [], "seconds": [], "reserved": [], "total": []}
    cols: dict[str, list[int]] = {c: [] for c in CATEGORY_NAMES}
    top_modules: list[list[list[Any]]] = []
    names: dict[str, int] = {}
    peak: dict[str, Any] = {"allocated_bytes": 0}
    k = 0
    for j, (seq, kind, i) in enumerate(events):
        if kind >= 2:
            reserved += i if kind == 2 else -i
        else:
            sign = 1 if kind == 0 else -1
            by_cat[category[i]] += sign * size[i]
            if kind == 0:
                live.add(i)
            else:
                live.discard(i)
            if category[i] == "activations":
                name = trace.scopes[trace.scope[i]] if trace.scope[i] >= 0 else _NO_SCOPE
                modules[name] = modules.get(name, 0) + sign * size[i]
        if j == peak_at and trace.full:
            peak = _peak(state, seq, by_cat, modules, live, category, size)
        if k < len(keep) and keep[k] == j:
            k += 1
            time = trace.start_time[i] if kind == 0 else trace.end_time[i] if kind == 1 else None
            out["seq"].append(seq)
            out["seconds"].append(None if time is None else round(time, 9))
            out["reserved"].append(reserved)
            out["total"].append(totals[j])
            for c in CATEGORY_NAMES:
                cols[c].append(by_cat[c])
            top = heapq.nlargest(_TOP_MODULES, ((b, m) for m, b in modules.items() if b > 0))
            top_modules.append([[names.setdefault(m, len(names)), b] for b, m in top])
    _fill_times(out["seconds"])
    if not trace.full:  # else: what the truncated trace held at its own peak, below
        peak = live_at_peak(state, device) or peak
    return {
        "device": device,
        **out,
        "allocated": {c: v for c, v in cols.items() if any(v)},
        "modules": top_modules,
        "module_names": list(names),
        "steps": [seq for seq, _ in trace.steps],
        "ooms": [
            {"seq": seq, "requested_bytes": nbytes, **_frame(state, frame)}
            for seq, dev, nbytes, frame in trace.ooms
            if dev == device
        ],
        "peak": peak,
        "events": len(events),
        "truncated": trace.full,
    }


def live_at_peak(state: SimState, device: int) -> dict[str, Any] | None:
    """What was live on ``cuda:device`` at its peak of allocated bytes: the one computation
    of it that the report, its JSON, the terminal and the HTML page all show.

    Every allocation and free of the run is in the trace; their rounded sizes, summed in
    order, reach the peak at one event (the first, if several tie), and the blocks live
    then are listed by category, activations by module, and the largest. The categories
    sum to ``allocated_bytes``, which is ``torch.cuda.max_memory_allocated()``.

    Returns:
        ``seq`` (the peak's event), ``allocated_bytes``, ``by_category`` (every category,
        bytes), ``activations_by_module`` (the 10 largest), ``largest`` (the 10 largest
        blocks: bytes, category, module, file, line); None when the trace stopped growing
        before the end of the run (its peak may be past the trace).
    """
    import numpy as np

    state.sync()
    trace = state.trace
    if trace.full:
        return None
    n = len(trace)
    mine = np.frombuffer(trace.device, dtype=np.int16, count=n) == device
    index = np.flatnonzero(mine)
    start = np.frombuffer(trace.start, dtype=np.int64, count=n)[index]
    end = np.frombuffer(trace.end, dtype=np.int64, count=n)[index]
    requested = np.frombuffer(trace.size, dtype=np.int64, count=n)[index]
    size = np.where(requested > 0, -(-requested // 512) * 512, 0)  # allocator.round_size
    freed = end >= 0
    seqs = np.concatenate([start, end[freed]])
    deltas = np.concatenate([size, -size[freed]])
    order = np.argsort(seqs, kind="stable")
    totals = np.cumsum(deltas[order])
    by_category = dict.fromkeys(CATEGORY_NAMES, 0)
    if not len(totals) or totals.max() <= 0:
        return {"seq": 0, "allocated_bytes": 0, "by_category": by_category,
                "activations_by_module": {}, "largest": []}  # fmt: skip
    peak_seq = int(seqs[order][int(np.argmax(totals))])
    live = (start <= peak_seq) & (~freed | (end > peak_seq)) & (size > 0)
    modules: dict[str, int] = {}
    blocks = []
    for i, nbytes in zip(index[live].tolist(), size[live].tolist(), strict=True):
        category = trace.category_of(i)
        by_category[category] += nbytes
        module = trace.scopes[trace.scope[i]] if trace.scope[i] >= 0 else None
        if category == "activations":
            name = module or _NO_SCOPE
            modules[name] = modules.get(name, 0) + nbytes
        blocks.append((nbytes, i, category, module))
    largest = heapq.nlargest(_LARGEST, blocks)
    return {
        "seq": peak_seq,
        "allocated_bytes": int(totals.max()),
        "by_category": by_category,
        "activations_by_module": dict(sorted(modules.items(), key=lambda mb: -mb[1])[:10]),
        "largest": [
            {"bytes": b, "category": c, "module": m, **_frame(state, trace.frame[i])}
            for b, i, c, m in largest
        ],
    }


def _fill_times(seconds: list[float | None]) -> None:
    """Segment events carry no time of their own: they take the previous event's."""
    last = 0.0
    for n, s in enumerate(seconds):
        if s is None:
            seconds[n] = last
        else:
            last = s


def _frame(state: SimState, index: int) -> dict[str, Any]:
    if index < 0:
        return {"file": None, "line": None}
    file, line, *_ = state.trace.frames[index]
    return {"file": file, "line": line}


def _peak(
    state: SimState,
    seq: int,
    by_cat: dict[str, int],
    modules: dict[str, int],
    live: set[int],
    category: list[str],
    size: list[int],
) -> dict[str, Any]:
    """What was live at the peak: by category, activations by module, the largest blocks."""
    trace = state.trace
    largest = heapq.nlargest(_LARGEST, live, key=lambda i: size[i])
    return {
        "seq": seq,
        "allocated_bytes": sum(by_cat.values()),
        "by_category": dict(by_cat),
        "activations_by_module": dict(
            sorted(((m, b) for m, b in modules.items() if b > 0), key=lambda mb: -mb[1])[:10]
        ),
        "largest": [
            {
                "bytes": size[i],
                "category": category[i],
                "module": trace.scopes[trace.scope[i]] if trace.scope[i] >= 0 else None,
                **_frame(state, trace.frame[i]),
            }
            for i in largest
        ],
    }


def sections(report: SimReport) -> list[dict[str, Any]]:
    """One entry per simulated GPU (or per simulated rank of ``--nproc-per-node``), with
    what the page and the picture show of it: title, capacity, the allocator's limit
    (capacity − CUDA context), peaks, verdict, estimated step time and the timeline (None
    if the run did not record one, e.g. its process died)."""
    from torchplace.sim.summary import rank_verdict

    out = []
    if report.ranks:
        for world in report.ranks:
            for r in world["ranks"]:
                out.append(
                    {
                        "title": f"rank {r['rank']} of {world['world']} "
                        f"(cuda:{r.get('device', r['local_rank'])}, "
                        f"{report.gpu.get('torch_name') or report.gpu.get('name', '?')})",
                        "capacity_bytes": r["capacity_bytes"],
                        "limit_bytes": r["capacity_bytes"] - r.get("context_bytes", 0),
                        "peak_allocated_bytes": r["peak_allocated_bytes"],
                        "peak_reserved_bytes": r["peak_reserved_bytes"],
                        "peak_breakdown": r["peak_breakdown"],
                        "verdict": rank_verdict(r),
                        "step_seconds": r.get("step_seconds"),
                        "steps": None,
                        "timeline": r.get("timeline"),
                    }
                )
        return out
    for n, d in enumerate(report.devices):
        out.append(
            {
                "title": f"cuda:{d.index} — {d.name}",
                "capacity_bytes": d.capacity_bytes,
                "limit_bytes": d.capacity_bytes - d.context_bytes,
                "peak_allocated_bytes": d.peak_allocated_bytes,
                "peak_reserved_bytes": d.peak_reserved_bytes,
                "peak_breakdown": d.peak_breakdown,
                "activations_by_module": d.peak_activations_by_module,
                "verdict": d.verdict,
                "step_seconds": d.estimated_step_seconds,
                "steps": d.steps,
                "timeline": report.timelines[n] if n < len(report.timelines) else None,
            }
        )
    return out


def unit(nbytes: float) -> tuple[str, int]:
    """The unit a chart whose largest value is ``nbytes`` is drawn in: GiB from 1 GiB."""
    return ("GiB", 1024**3) if nbytes >= 1024**3 else ("MiB", 1024**2)


def plot(report: SimReport, path: str | Path) -> None:
    """Save the memory timeline of every section as one PNG (matplotlib; the same data and
    colours as the HTML page), written whole or not at all.

    Raises:
        RuntimeError: matplotlib is not installed (``pip install 'torchplace[plot]'``).
        ValueError: no section has a timeline.
    """
    from torchplace._output import write_atomic
    from torchplace._units import format_bytes
    from torchplace.bench.report import require_matplotlib

    require_matplotlib()
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [s for s in sections(report) if s["timeline"]]
    if not shown:
        raise ValueError("there is no timeline to plot: the simulated run recorded none.")
    fig, axes = plt.subplots(len(shown), 1, figsize=(12.8, 3.6 * len(shown)), squeeze=False)
    for ax, s in zip(axes[:, 0], shown, strict=True):
        t = s["timeline"]
        name, scale = unit(max(s["peak_reserved_bytes"], s["peak_allocated_bytes"], 1))
        layers = list(t["allocated"].items())
        ax.stackplot(
            t["seq"],
            *[[v / scale for v in values] for _, values in layers],
            labels=[c.replace("_", " ") for c, _ in layers],
            colors=[COLOURS[c] for c, _ in layers],
            linewidth=0,
        )
        ax.plot(t["seq"], [v / scale for v in t["reserved"]], color="black", lw=1.2,
                label="reserved")  # fmt: skip
        peak = t["peak"]
        ax.plot([peak["seq"]], [s["peak_allocated_bytes"] / scale], "o", color="black")
        ax.annotate(
            f"peak {format_bytes(s['peak_allocated_bytes'])}",
            (peak["seq"], s["peak_allocated_bytes"] / scale),
            textcoords="offset points",
            xytext=(6, 6),
            fontsize=9,
            fontweight="bold",
        )
        limit = s["limit_bytes"] / scale
        if limit <= 2 * max(t["reserved"] + [1]) / scale:
            ax.axhline(limit, color="#555555", ls="--", lw=1, label="capacity − CUDA context")
        for n, seq in enumerate(t["steps"], 1):
            ax.axvline(seq, color="#777777", lw=0.6, ls=":")
            if len(t["steps"]) <= 20:
                ax.text(seq, 1, f" step {n}", fontsize=7, color="#555555", va="top",
                        transform=ax.get_xaxis_transform())  # fmt: skip
        for oom in t["ooms"]:
            ax.axvline(oom["seq"], color=COLOURS["activations"], lw=2)
            ax.text(oom["seq"], limit * 0.9, " out of memory", color="#A33A00", fontsize=9)
        ax.set_title(f"{s['title']} — {s['verdict']}", loc="left", fontsize=10)
        ax.set_ylabel(f"{name} (1 {name} = {scale} B)")
        ax.set_xlabel("allocation events, in run order")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.margins(x=0)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.1)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    write_atomic(path, buffer.getvalue())


#: Okabe–Ito colours (distinguishable with the common colour-vision deficiencies)
COLOURS = {
    "parameters": "#0072B2",  # blue
    "gradients": "#E69F00",  # orange
    "optimizer_state": "#009E73",  # bluish green
    "activations": "#D55E00",  # vermillion
    "communication": "#CC79A7",  # reddish purple
    "other": "#999999",  # grey
}
