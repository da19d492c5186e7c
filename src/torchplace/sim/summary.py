"""What a simulated run's report says, written once for every way it is shown.

The terminal tables (:func:`torchplace.sim.report.render`) and the HTML page
(:mod:`torchplace.sim.html`) show the same sentences and figures; ``--json`` is the
report's :meth:`~torchplace.sim.report.SimReport.to_dict`, the numbers these are made
from. Each figure is read from one field of the report and formatted here, so the three
cannot disagree.

Examples:
    >>> from torchplace.sim.report import SimReport
    >>> from torchplace.sim.summary import verdict
    >>> report = SimReport(exit_code=3, stopped_at={"file": "train.py", "line": 9,
    ...                                             "last_output": "bad config"})
    >>> v = verdict(report)
    >>> v.ok, v.text
    (False, 'the script did not finish: exit code 3 at train.py:9')
    >>> v.details
    ['last output: bad config']
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchplace._units import format_bytes

if TYPE_CHECKING:
    from torchplace.sim.report import DeviceReport, SimReport

__all__ = [
    "Verdict",
    "device_verdict",
    "file_lines",
    "finished",
    "place",
    "process_label",
    "process_rows",
    "verdict",
]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STOPPED = ("KeyboardInterrupt", "Interrupted", "Terminated")


@dataclass(frozen=True)
class Verdict:
    """The run in one sentence: ``ok`` True (it fits), False (it did not: out of memory,
    failed, stopped) or None (nothing to judge: it put nothing on a simulated GPU)."""

    text: str
    ok: bool | None
    details: list[str] = field(default_factory=list)


def place(file: str | None, line: int | None = None) -> str:
    """``file:line`` as a user finds it: relative to the current folder when inside it,
    ``torchplace/...`` for the package's own examples (wherever pip put them)."""
    if not file:
        return "-"
    path = file
    if os.path.isabs(file):
        cwd = os.getcwd()
        if file.startswith(_PACKAGE_DIR + os.sep):
            path = os.path.join("torchplace", os.path.relpath(file, _PACKAGE_DIR))
        elif file.startswith(cwd + os.sep):
            path = os.path.relpath(file, cwd)
    return path if line is None else f"{path}:{line}"


def finished(report: SimReport) -> bool:
    """Whether the script ran to its end: no error, no signal, exit code 0."""
    return report.error is None and report.interrupted is None and not report.exit_code


def _used(report: SimReport) -> bool:
    moved = sum(t.get("count", 0) for t in report.transfers.values())
    return moved > 0 or any(d.peak_allocated_bytes for d in report.devices)


def device_verdict(report: SimReport, device: DeviceReport) -> str:
    """One device's verdict: out of memory (there), did not finish, unused, or fits."""
    oom = report.oom
    if oom is not None and oom.get("device") == device.index:
        where = f" at {place(oom.get('file'), oom.get('line'))}" if oom.get("file") else ""
        return f"out of memory{where}"
    if not finished(report):
        return "did not finish"
    if not device.peak_allocated_bytes:
        return "unused"
    return "fits"


def verdict(report: SimReport) -> Verdict:
    """The run's verdict (see :class:`Verdict`); never "fits" for a run that did not end.
    A run whose GPU work was done by Python processes it started is judged by theirs."""
    own = _own_verdict(report)
    if own.ok is False:
        return own
    alone = [r for w in report.ranks for r in w["ranks"] if r.get("distributed") is False]
    if alone:
        devices = sorted({f"cuda:{r.get('device', 0)}" for r in alone})
        return Verdict(
            "not distributed: the script never calls torch.distributed.init_process_group, "
            "so each rank runs the whole job on its own (each rank simulated put its "
            f"tensors on {' and '.join(devices)}); make it a DDP/FSDP script, or simulate "
            "it once without --nproc-per-node",
            False,
        )
    children = [(p, verdict(child)) for p, child in _children(report)]
    bad = [(p, v) for p, v in children if v.ok is False]
    if bad:
        p, v = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        return Verdict(f"in {process_label(p)}{more}: {v.text}", False, v.details)
    worked = [p for p, v in children if v.ok]
    if own.ok is None and worked:
        n = len(worked)
        return Verdict(
            f"fits: the GPU work ran in {n} process{'es' if n > 1 else ''} the script "
            "started, each simulated (see the processes below)",
            True,
        )
    return own


def _children(report: SimReport) -> list[tuple[dict[str, Any], SimReport]]:
    return [(p, type(report).from_dict(p["report"])) for p in report.processes if p.get("report")]


def _own_verdict(report: SimReport) -> Verdict:
    e = report.error or {}
    where = f" at {place(e.get('file'), e.get('line'))}" if e.get("file") else ""
    code = report.exit_code
    exit_text = f"; exit code {code}" if code else ""
    if report.oom is not None:
        o = report.oom
        at = f" at {place(o.get('file'), o.get('line'))}" if o.get("file") else ""
        return Verdict(
            f"out of memory on cuda:{o['device']}{at} (it asked for "
            f"{format_bytes(o['requested_bytes'])} more){exit_text}",
            False,
        )
    if report.interrupted or e.get("type") in _STOPPED:
        what = "Ctrl-C" if report.interrupted in (None, "SIGINT") else report.interrupted
        if e.get("type") == "Terminated" and not report.interrupted:
            what = "SIGTERM"
        details = [e["message"]] if e.get("type") in ("Interrupted", "Terminated") else []
        return Verdict(
            f"interrupted ({what}){where}: the figures cover the run until then{exit_text}",
            False,
            details,
        )
    if e.get("type") == "Timeout":
        return Verdict(f"{e['message']}{where}: the figures cover the run until then", False)
    if e:
        first = (e.get("message") or "").strip().splitlines()
        return Verdict(
            f"the script failed{where}: {e['type']}" + (f": {first[0]}" if first else ""),
            False,
            [f"hint: {e['hint']}"] if e.get("hint") else [],
        )
    if code:
        s = report.stopped_at or {}
        at = f" at {place(s.get('file'), s.get('line'))}" if s.get("file") else ""
        details = [f"last output: {s['last_output']}"] if s.get("last_output") else []
        if s.get("hint"):
            details.append(f"hint: {s['hint']}")
        return Verdict(f"the script did not finish: exit code {code}{at}", False, details)
    if not _used(report):
        return Verdict(
            "nothing to fit: the script put nothing on a simulated GPU (no tensor on cuda, "
            "no copy to it)",
            None,
        )
    return Verdict("fits", True)


def process_label(section: dict[str, Any]) -> str:
    """A child process as a person recognises it: its command line (``python train.py
    --epochs 1``), or multiprocessing's name for a spawned one, and its pid."""
    argv = section.get("argv")
    if section.get("start_method") == "spawn" or not argv:
        name = str(section.get("name") or "process")
    elif isinstance(argv, str):
        name = argv
    else:
        name = shlex.join([os.path.basename(str(argv[0])), *map(str, argv[1:])])
    if len(name) > 60:
        name = name[:57] + "..."
    return f"{name} (pid {section.get('pid')})"


def process_rows(report: SimReport) -> list[list[str]]:
    """One row per process the script started: process, how, exit code, peak allocated
    per simulated GPU, verdict (as :func:`verdict` says it of that process's own run)."""
    rows = []
    for p in report.processes:
        sub = p.get("report")
        if sub is None:
            status = p.get("reason") or "no report: it died, or was killed"
            peaks = "-"
        else:
            child = type(report).from_dict(sub)
            status = verdict(child).text
            peaks = ", ".join(
                f"cuda:{d.index} {format_bytes(d.peak_allocated_bytes)}"
                for d in child.devices
                if d.peak_allocated_bytes
            )
        code = p.get("exit_code")
        rows.append(
            [
                process_label(p),
                str(p.get("start_method", "?")),
                "-" if code is None else str(code),
                peaks or "-",
                status,
            ]
        )
    return rows


def file_lines(report: SimReport) -> list[str]:
    """One line per file the script saved from simulated tensors: where it went, and why
    when that is not where the script said."""
    lines = []
    for f in report.files:
        path = place(f["path"])
        if f["written_to"] == f["path"]:
            lines.append(f"{path}: written where the script said ({f.get('why', 'in place')})")
        else:
            why = f.get("why") or "a simulation never replaces a real file"
            lines.append(f"{path} → {f['written_to']}: {why}")
    return lines


# --- the tables: each built once, drawn by the terminal (report.render) and the page (html)


@dataclass
class Table:
    """A table as both outputs show it: every cell already formatted text.

    ``right`` names the columns aligned right (numbers); a column named ``verdict`` is
    coloured by :func:`verdict_class`; ``notes`` are the lines printed under the table.
    """

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    right: frozenset[str] = frozenset()
    notes: list[str] = field(default_factory=list)


def verdict_class(text: str) -> str:
    """ "good", "dim" or "bad": how a verdict cell is coloured."""
    if text == "fits" or text.startswith("fits"):
        return "good"
    if text in ("unused", "-", ""):
        return "dim"
    return "bad"


_CATEGORIES = ("parameters", "unsharded_parameters", "gradients", "optimizer_state",
               "activations", "communication", "other")  # fmt: skip
_NUMBERS = frozenset({"capacity", "peak allocated", "peak reserved", "headroom", "total",
                      "count", "bytes", "per step", "steps", "whole run", "step time (est.)",
                      "peak alloc.", "peak res.", "step (est.)", "comm.", "range", "GPU busy",
                      "host", "throughput", "$ / 1,000 steps"})  # fmt: skip


def seconds_text(s: float | None) -> str:
    """Seconds as a person reads them: 1.23 s, 4.56 ms, 7.8 µs; "-" for unknown."""
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} µs"


def device_table(report: SimReport) -> Table:
    """Each simulated GPU: capacity, peaks, headroom, verdict."""
    table = Table(
        "Memory per GPU",
        ["device", "capacity", "peak allocated", "peak reserved", "headroom", "verdict"],
        right=_NUMBERS,
    )
    for d in report.devices:
        table.rows.append(
            [
                f"cuda:{d.index}",
                format_bytes(d.capacity_bytes),
                format_bytes(d.peak_allocated_bytes),
                format_bytes(d.peak_reserved_bytes),
                format_bytes(d.headroom_bytes),
                d.verdict,
            ]
        )
    context = format_bytes(report.devices[0].context_bytes) if report.devices else "-"
    table.notes.append(
        "reserved = the caching allocator's segments; headroom = capacity − CUDA context "
        f"({context}) − peak reserved; GiB = 1024³ bytes"
    )
    if report.values_decision:  # which values the run held (--values), from where, why
        v = report.values_decision
        start = v.get("placeholder_from")
        since = f" from {place(start['file'], start['line'])} on" if start else ""
        table.notes.append(f"values: {v['ran']}{since} — {v['reason']}")
    return table


def categories(breakdowns: list[dict[str, int]]) -> list[str]:
    """The memory categories any of these breakdowns holds bytes in, in a fixed order."""
    used = [c for c in _CATEGORIES if any(b.get(c) for b in breakdowns)]
    return used or ["activations"]


def live_table(report: SimReport) -> Table:
    """What was live at each GPU's peak, by category; the categories add up to the peak."""
    cats = categories([d.peak_breakdown for d in report.devices])
    table = Table(
        "Live at the peak",
        ["device", *(c.replace("_", " ") for c in cats), "total"],
        right=frozenset({*(c.replace("_", " ") for c in cats), "total"}),
    )
    for d in report.devices:
        table.rows.append(
            [
                f"cuda:{d.index}",
                *(format_bytes(d.peak_breakdown.get(c, 0)) for c in cats),
                format_bytes(sum(d.peak_breakdown.values())),
            ]
        )
    return table


def module_lines(report: SimReport, top: int = 5) -> list[str]:
    """Per GPU, the modules whose activations were largest at the peak."""
    return [
        f"cuda:{d.index} activations by module: "
        + ", ".join(
            f"{k} {format_bytes(v)}" for k, v in list(d.peak_activations_by_module.items())[:top]
        )
        for d in report.devices
        if d.peak_activations_by_module
    ]


_TRANSFERS = {"h2d": "host → device", "d2h": "device → host", "d2d": "device → device"}


def moves_table(report: SimReport, syncs: int = 10) -> Table:
    """Transfers by direction (count, bytes), then the synchronisations by line."""
    table = Table("Transfers and synchronisations", ["what", "count", "bytes / where"],
                  right=frozenset({"count", "bytes / where"}))  # fmt: skip
    for kind, label in _TRANSFERS.items():
        t = report.transfers.get(kind, {"count": 0, "bytes": 0})
        table.rows.append([label, str(t["count"]), format_bytes(t["bytes"])])
    for s in report.syncs[:syncs]:
        table.rows.append([f"sync: {s['kind']}", str(s["count"]), place(s["file"], s["line"])])
        for f in s.get("lint", []):
            at = "" if f["line"] == s["line"] else f" (line {f['line']})"
            table.notes.append(
                f"sync at {place(s['file'], s['line'])}: {f['code']}{at} — {f['hint']} "
                f"(torchplace lint finds it in the source)"
            )
    if len(report.syncs) > syncs:
        table.notes.append(f"{len(report.syncs) - syncs} more lines synchronise (see --json)")
    return table


def time_table(report: SimReport) -> Table:
    """The step-time model's estimate per GPU, what bounds it, and the assumptions behind it;
    with ``--price``, what 1,000 steps cost."""
    table = Table(
        "Estimated time (the step-time model, not a measurement)",
        ["device", "per step", "range", "bound", "GPU busy", "host", "throughput", "steps",
         "whole run"],
        right=_NUMBERS,
    )  # fmt: skip
    table.rows += [time_row(d) for d in report.devices]
    cost = report.costs.get("usd_per_1000_steps", {}).get(report.gpu.get("key", ""))
    if cost is not None and not report.plan:
        price = report.costs["usd_per_hour"][report.gpu["key"]]
        table.notes.append(
            f"1,000 steps cost {usd_text(cost)} at ${price:g} per GPU-hour (--price)"
        )
    table.notes += [
        f"--price {key}: that GPU was not simulated (add it to --gpu)"
        for key in report.costs.get("not_simulated", [])
    ]
    if any(d.step.get("step_kind") == "call" for d in report.devices if d.step):
        table.notes.append(
            "a step here is one call of the script's outermost module (it takes no optimizer steps)"
        )
    if any(d.bound == "host" for d in report.devices):
        table.notes.append(
            "host-bound: Python issues the kernels more slowly than the GPU runs them, so a "
            "faster GPU would not shorten the step (larger batches, CUDA graphs or "
            "torch.compile would)"
        )
    for d in report.devices[:1]:
        kernels = [o for o in d.estimate.get("top_ops", [])[:5] if o.get("seconds")]
        if kernels:
            table.notes.append(
                f"cuda:{d.index} top kernels: "
                + ", ".join(
                    f"{o['op']} {seconds_text(o['seconds'])} ({o['bound']})" for o in kernels
                )
            )
    table.notes += [f"assumes: {a}" for a in report.assumptions]
    return table


def time_row(d: DeviceReport) -> list[str]:
    """The estimated-time cells of one device: per step, its range, the bound, the GPU's
    and the host's time per step, throughput, steps, the whole run."""
    step = d.step
    low_high = step.get("step_range_seconds")
    rng = f"{seconds_text(low_high[0])}–{seconds_text(low_high[1])}" if low_high else "-"
    return [
        f"cuda:{d.index}",
        seconds_text(d.estimated_step_seconds),
        rng,
        d.bound or "-",
        seconds_text(step.get("gpu_seconds")),
        seconds_text(step.get("host_seconds")),
        throughput_text(step),
        str(d.steps),
        seconds_text(d.estimated_total_seconds),
    ]


def usd_text(usd: float | None) -> str:
    """Dollars for people: cents where they matter, two significant digits below a cent."""
    if usd is None:
        return "-"
    return f"${usd:,.2f}" if usd >= 0.01 else f"${usd:.2g}"


def throughput_text(step: dict[str, Any]) -> str:
    """Samples (and tokens) per second of a step summary, or ``-``."""

    def rate(x: float) -> str:
        return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"

    parts = []
    if step.get("samples_per_second"):
        parts.append(f"{rate(step['samples_per_second'])} samples/s")
    if step.get("tokens_per_second"):
        parts.append(f"{rate(step['tokens_per_second'])} tokens/s")
    return ", ".join(parts) or "-"


def process_table(report: SimReport) -> Table:
    """The processes the script started (see :func:`process_rows`)."""
    return Table(
        "Processes the script started (each simulated on its own)",
        ["process", "start", "exit", "peak allocated per GPU", "verdict"],
        process_rows(report),
    )


def plan_table(plan: dict[str, Any], costs: dict[str, Any] | None = None) -> Table:
    """Every GPU a run was replayed on (``torchplace sim --gpu all``), smallest first; with
    ``--price`` (``costs``), the cost of 1,000 steps, cheapest first."""
    per_1000 = (costs or {}).get("usd_per_1000_steps", {})
    table = Table(
        "Which GPUs it fits on (one run per behaviour class, replayed on each GPU)",
        ["GPU", "capacity", "peak allocated", "peak reserved", "headroom", "verdict",
         "step time (est.)", "bound", *(["$ / 1,000 steps"] if costs else [])],
        right=_NUMBERS,
    )  # fmt: skip
    order = sorted(
        plan["gpus"], key=lambda g: (per_1000.get(g["key"], float("inf")), g["capacity_bytes"])
    )
    for g in order:
        oom = g.get("oom")
        if oom:  # the file's name only: the table has a row per GPU
            name = os.path.basename(oom["file"]) if oom.get("file") else ""
            verdict_text = f"out of memory at {name}:{oom['line']}" if name else "out of memory"
        else:
            verdict_text = "fits"
        table.rows.append(
            [
                g["name"] + (f" ×{g['devices']}" if g.get("devices", 1) > 1 else ""),
                format_bytes(g["capacity_bytes"]),
                format_bytes(g["peak_allocated_bytes"]),
                format_bytes(g["peak_reserved_bytes"]),
                format_bytes(g["headroom_bytes"]) if not oom else "-",
                verdict_text,
                seconds_text(g.get("estimated_step_seconds")) if not oom else "-",
                (g.get("step") or {}).get("bound", "-") if not oom else "-",
                *([usd_text(per_1000.get(g["key"]))] if costs else []),
            ]
        )
    if costs:
        table.notes.append(
            "cost of 1,000 steps at the hourly prices given (--price), all the run's GPUs "
            "counted; GPUs without a price show -"
        )
    table.notes += [f"ran on {r['gpu']} for {', '.join(r['class'])}" for r in plan.get("runs", [])]
    table.notes += [f"assumes: {line}" for line in plan.get("assumptions", [])]
    return table


def rank_verdict(rank: dict[str, Any]) -> str:
    """One simulated rank's verdict, as its row says it."""
    if rank.get("distributed") is False:
        return "not distributed"
    err = rank.get("error")
    return str(err["type"]) if err else str(rank["verdict"])


def rank_tables(report: SimReport) -> list[Table]:
    """Per-rank memory and time of ``torchplace sim --nproc-per-node``, one per world."""
    tables = []
    for world in report.ranks:
        cats = categories([r["peak_breakdown"] for r in world["ranks"]])
        comm = any(r.get("communication_seconds") for r in world["ranks"])
        table = Table(
            f"Per rank: {world['world']} processes ({world['nproc_per_node']} per node × "
            f"{world['nnodes']} node(s)), each rank simulated on its own",
            ["rank", "peak alloc.", "peak res.", *(_SHORT.get(c, c) for c in cats),
             "step (est.)", *(["comm."] if comm else []), "verdict"],
            right=_NUMBERS | frozenset(_SHORT.get(c, c) for c in cats),
        )  # fmt: skip
        for r in world["ranks"]:
            table.rows.append(
                [
                    str(r["rank"]),
                    format_bytes(r["peak_allocated_bytes"]),
                    format_bytes(r["peak_reserved_bytes"]),
                    *(format_bytes(r["peak_breakdown"].get(c, 0)) for c in cats),
                    seconds_text(r.get("step_seconds")),
                    *([seconds_text(r.get("communication_seconds"))] if comm else []),
                    rank_verdict(r),
                ]
            )
        table.notes.append(
            "params: what each rank keeps (under FSDP its shards); unsharded: FSDP's gathered "
            "full parameters live at the peak"
            + ("; comm.: the collectives' time over the run (setup broadcasts included) per step"
               if comm else "")
        )  # fmt: skip
        peaks = {r["peak_allocated_bytes"] for r in world["ranks"]}
        if len(world["ranks"]) > 1 and len(peaks) == 1:
            table.notes.append(
                "the ranks simulated agree: ranks 0 and the last bound the others (uneven "
                "shards fall on the last ranks; rank 0 does the extra work, such as saving)"
            )
        tables.append(table)
    return tables


_SHORT = {
    "parameters": "params",
    "unsharded_parameters": "unsharded",
    "gradients": "grads",
    "optimizer_state": "opt. state",
    "activations": "activ.",
    "communication": "comm. bufs",
    "other": "other",
}
