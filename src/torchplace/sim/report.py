"""What a simulation found: a report object, its versioned JSON form and its rich table."""

from __future__ import annotations

import itertools
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchplace._units import format_bytes
from torchplace.sim import _advice
from torchplace.sim.summary import device_verdict, file_lines, process_rows, verdict

if TYPE_CHECKING:
    from rich.console import Console

    from torchplace.sim._state import SimState

__all__ = ["SCHEMA_VERSION", "DeviceReport", "SimReport", "print_report", "render"]

#: Bump when a key of :meth:`SimReport.to_dict` changes meaning or disappears.
SCHEMA_VERSION = 1


@dataclass
class DeviceReport:
    """One simulated GPU after the run (bytes throughout)."""

    index: int
    name: str
    capacity_bytes: int
    context_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    headroom_bytes: int
    verdict: str
    peak_breakdown: dict[str, int] = field(default_factory=dict)
    peak_activations_by_module: dict[str, int] = field(default_factory=dict)
    estimated_step_seconds: float | None = None
    estimated_total_seconds: float = 0.0
    steps: int = 0
    bound: str | None = None
    estimate: dict[str, Any] = field(default_factory=dict)


@dataclass
class SimReport:
    """The result of a simulation; filled in when the ``simulate()`` block exits.

    ``to_dict()`` is the ``--json`` output (see :data:`SCHEMA_VERSION`).
    """

    gpu: dict[str, Any] = field(default_factory=dict)
    devices: list[DeviceReport] = field(default_factory=list)
    oom: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    transfers: dict[str, dict[str, int]] = field(default_factory=dict)
    transfer_sites: list[dict[str, Any]] = field(default_factory=list)  # by file and line
    syncs: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    processes: list[dict[str, Any]] = field(default_factory=list)
    plan: dict[str, Any] | None = None
    decisions: list[str] = field(default_factory=list)
    ranks: list[dict[str, Any]] = field(default_factory=list)  # --nproc-per-node runs
    exit_code: int | None = None
    #: "SIGINT" (Ctrl-C) or "SIGTERM" when ``torchplace sim`` passed one on to the script
    interrupted: str | None = None
    #: where a script that exited with a non-zero code stopped: ``file``, ``line`` (the
    #: user's line that raised SystemExit), ``last_output`` (the last line it printed),
    #: ``hint`` (what to do, when torchplace can tell)
    stopped_at: dict[str, Any] | None = None
    #: whether the script called torch.distributed.init_process_group (None: not watched;
    #: torchplace sim watches)
    distributed: bool | None = None
    script: str | None = None
    torch_version: str = ""
    values: str = "real"
    assumptions: list[str] = field(default_factory=list)
    #: per device, the memory timeline (:mod:`torchplace.sim.timeline`); filled by
    #: :meth:`add_timelines` (``torchplace sim --html/--png`` do), else empty
    timelines: list[dict[str, Any]] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        """True when no simulated device ran out of memory."""
        return self.oom is None

    def device(self, index: int = 0) -> DeviceReport:
        """The report of simulated ``cuda:index``."""
        return self.devices[index]

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON form."""
        return {"schema_version": SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SimReport:
        data = {k: v for k, v in data.items() if k != "schema_version"}
        devices = [DeviceReport(**d) for d in data.pop("devices", [])]
        return cls(devices=devices, **data)

    @property
    def state(self) -> SimState | None:
        """The simulation's live state (in the process that ran it; not in the JSON)."""
        return getattr(self, "_state", None)

    def add_timelines(self) -> None:
        """Fill :attr:`timelines` from the live state (in the process that ran the
        simulation; a report read back from JSON keeps the timelines it was saved with)."""
        from torchplace.sim.timeline import timeline

        if self.state is not None:
            self.timelines = [timeline(self.state, d.index) for d in self.state.devices]

    def conclude(self) -> None:
        """Give each device its verdict from what is known of the run now (the exit code
        and a signal are known only after the script ends: call again then)."""
        for d in self.devices:
            d.verdict = device_verdict(self, d)

    def fill(self, state: SimState) -> None:
        """Copy what ``state`` recorded into this report.

        Each device's ``step_marks`` hold its estimated seconds at the start and after
        every ``optimizer.step()``; a step's time is the median of the differences.
        """
        state.sync()
        self._state = state
        self.oom = (
            None
            if state.oom is None
            else {k: state.oom[k] for k in ("device", "requested_bytes", "file", "line")}
        )
        self.transfers = {k: {"count": v[0], "bytes": v[1]} for k, v in state.transfers.items()}
        self.transfer_sites = [
            {"kind": kind, "file": file, "line": line, "count": n, "bytes": nbytes}
            for (kind, file, line), (n, nbytes) in sorted(
                state.transfer_sites.items(), key=lambda kv: -kv[1][1]
            )
        ]
        self.syncs = [
            {"kind": kind, "file": file, "line": line, "count": n}
            for (kind, file, line), n in sorted(state.syncs.items(), key=lambda kv: -kv[1])
        ]
        for s in self.syncs:
            s["lint"] = _advice.link(s["file"], s["line"], s["kind"])
        kind = _advice.error_kind(self.error["message"]) if self.error else None
        if self.error and kind:
            self.error["lint"] = _advice.link(
                self.error["file"], self.error["line"], kind, in_function=True
            )
        self.notes = [{"text": t, "count": n} for t, n in state.notes.most_common()]
        self.files = [dict(f) for f in state.files]
        self.decisions = sorted(state.decisions)
        self.devices = []
        for dev in state.devices:
            est = dev.estimate
            assert est is not None  # simulate() gives every device its estimate
            deltas = [b - a for a, b in itertools.pairwise(dev.step_marks)]
            alloc = dev.allocator
            self.devices.append(
                DeviceReport(
                    index=dev.index,
                    name=dev.spec.torch_name,
                    capacity_bytes=dev.capacity,
                    context_bytes=dev.context_bytes,
                    peak_allocated_bytes=dev.peak_allocated,
                    peak_reserved_bytes=alloc.peak_reserved_bytes,
                    headroom_bytes=dev.capacity - dev.context_bytes - alloc.peak_reserved_bytes,
                    verdict="",  # conclude(), below
                    peak_breakdown=dict(dev.peak_breakdown),
                    peak_activations_by_module=dict(dev.peak_scopes),
                    estimated_step_seconds=statistics.median(deltas) if deltas else None,
                    estimated_total_seconds=est.seconds,
                    steps=len(deltas),
                    bound=est.total.bound if est.total.seconds else None,
                    estimate=est.to_dict(),
                )
            )
        self.conclude()


def seconds_text(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} µs"


def render_plan(plan: dict[str, Any], console: Console) -> None:
    """The table of every GPU a run was replayed on (``torchplace sim --gpu all``)."""
    from rich.table import Table

    table = Table(
        title="Which GPUs it fits on (one run per behaviour class, replayed on each GPU)",
        title_justify="left",
    )
    for col in ("GPU", "capacity", "peak allocated", "peak reserved", "headroom", "verdict",
                "step time (est.)"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("GPU", "verdict") else "right")
    for g in sorted(plan["gpus"], key=lambda g: g["capacity_bytes"]):
        oom = g.get("oom")
        if oom:
            where = f" at {Path(oom['file']).name}:{oom['line']}" if oom.get("file") else ""
            verdict = f"[bold red]out of memory{where}[/]"
        else:
            verdict = "[green]fits[/]"
        table.add_row(
            g["name"] + (f" ×{g['devices']}" if g.get("devices", 1) > 1 else ""),
            format_bytes(g["capacity_bytes"]),
            format_bytes(g["peak_allocated_bytes"]),
            format_bytes(g["peak_reserved_bytes"]),
            format_bytes(g["headroom_bytes"]) if not oom else "-",
            verdict,
            seconds_text(g.get("estimated_step_seconds")) if not oom else "-",
        )
    console.print(table)
    for run in plan.get("runs", []):
        console.print(f"  ran on {run['gpu']} for {', '.join(run['class'])}", style="dim")
    for line in plan.get("assumptions", []):
        console.print(f"  assumes: {line}", style="dim")


def render_ranks(sweep: list[dict[str, Any]], console: Console) -> None:
    """Per-rank memory and time of ``torchplace sim --nproc-per-node`` (one table per world)."""
    from rich.table import Table

    cats = ("parameters", "unsharded_parameters", "gradients", "optimizer_state", "activations",
            "communication")  # fmt: skip
    for world in sweep:
        table = Table(
            title=f"Per rank: {world['world']} processes ({world['nproc_per_node']} per node × "
            f"{world['nnodes']} node(s)), each rank simulated on its own",
            title_justify="left",
        )
        for col in ("rank", "peak alloc.", "peak res.", "params", "unsharded", "grads",
                    "opt. state", "activ.", "comm. bufs", "step (est.)", "comm.",
                    "verdict"):  # fmt: skip
            table.add_column(col, justify="left" if col in ("rank", "verdict") else "right")
        for r in world["ranks"]:
            err = r.get("error")
            verdict = f"{err['type']}" if err else r["verdict"]
            if r.get("distributed") is False:
                verdict = f"not distributed (cuda:{r.get('device', 0)})"
            style = "green" if verdict == "fits" else "bold red"
            table.add_row(
                f"{r['rank']}",
                format_bytes(r["peak_allocated_bytes"]),
                format_bytes(r["peak_reserved_bytes"]),
                *(format_bytes(r["peak_breakdown"].get(c, 0)) for c in cats),
                seconds_text(r.get("step_seconds")),
                seconds_text(r.get("communication_seconds")),
                f"[{style}]{verdict}[/]",
            )
        console.print(table)
        console.print(
            "  params: what each rank keeps (under FSDP its shards); unsharded: FSDP's gathered "
            "full parameters live at the peak; comm.: the collectives' time over the run (setup "
            "broadcasts included) per step",
            style="dim",
        )
        peaks = {r["peak_allocated_bytes"] for r in world["ranks"]}
        if len(world["ranks"]) > 1 and len(peaks) == 1:
            console.print(
                "  the ranks simulated agree: ranks 0 and the last bound the others (uneven "
                "shards fall on the last ranks; rank 0 does the extra work, such as saving)",
                style="dim",
            )


_VERDICT_STYLE = {True: "bold green", False: "bold red", None: "bold yellow"}


def render(report: SimReport, console: Console) -> None:
    """Print the report as rich tables (GiB = 1024³ bytes)."""
    from rich.markup import escape
    from rich.table import Table

    if report.plan:
        render_plan(report.plan, console)
    if report.ranks:
        render_ranks(report.ranks, console)
    gpu = report.gpu.get("torch_name") or report.gpu.get("name", "?")
    console.print(f"torchplace sim — {len(report.devices)} × simulated {gpu}", style="bold")
    v = verdict(report)
    console.print(f"verdict: {v.text}", style=_VERDICT_STYLE[v.ok], markup=False)
    for line in v.details:
        console.print(f"  {line}", markup=False)
    table = Table()
    for col in ("device", "capacity", "peak allocated", "peak reserved", "headroom", "verdict"):
        table.add_column(col, justify="left" if col in ("device", "verdict") else "right")
    for d in report.devices:
        style = {"fits": "green", "unused": "dim"}.get(d.verdict, "bold red")
        table.add_row(
            f"cuda:{d.index}",
            format_bytes(d.capacity_bytes),
            format_bytes(d.peak_allocated_bytes),
            format_bytes(d.peak_reserved_bytes),
            format_bytes(d.headroom_bytes),
            f"[{style}]{d.verdict}[/]",
        )
    console.print(table)
    console.print(
        "  reserved = the caching allocator's segments; headroom = capacity − CUDA context "
        f"({format_bytes(report.devices[0].context_bytes) if report.devices else '-'}) "
        "− peak reserved. Sizes in GiB = 1024³ bytes.",
        style="dim",
    )

    live = Table(title="Live at the peak", title_justify="left")
    live.add_column("device")
    cats: tuple[str, ...] = (
        "parameters", "gradients", "optimizer_state", "activations", "communication", "other"
    )  # fmt: skip
    if any(d.peak_breakdown.get("unsharded_parameters") for d in report.devices):
        cats = ("parameters", "unsharded_parameters", *cats[1:])
    for c in cats:
        live.add_column(c.replace("_", " "), justify="right")
    for d in report.devices:
        live.add_row(f"cuda:{d.index}", *(format_bytes(d.peak_breakdown.get(c, 0)) for c in cats))
    console.print(live)
    for d in report.devices:
        if d.peak_activations_by_module:
            top = ", ".join(
                f"{k} {format_bytes(v)}" for k, v in list(d.peak_activations_by_module.items())[:5]
            )
            console.print(f"  cuda:{d.index} activations by module: {top}", style="dim")

    moves = Table(title="Transfers and synchronisations", title_justify="left")
    moves.add_column("what")
    moves.add_column("count", justify="right")
    moves.add_column("bytes / where", justify="right")
    names = {"h2d": "host → device", "d2h": "device → host", "d2d": "device → device"}
    for kind, label in names.items():
        t = report.transfers.get(kind, {"count": 0, "bytes": 0})
        moves.add_row(label, str(t["count"]), format_bytes(t["bytes"]))
    for s in report.syncs[:10]:
        moves.add_row(f"sync: {s['kind']}", str(s["count"]), f"{s['file']}:{s['line']}")
    console.print(moves)
    for s in report.syncs[:10]:
        _print_advice(console, s.get("lint", []), f"sync at line {s['line']}", s["line"])

    est = Table(title="Estimated time (roofline estimate, not a measurement)", title_justify="left")
    est.add_column("device")
    est.add_column("per step", justify="right")
    est.add_column("steps", justify="right")
    est.add_column("whole run", justify="right")
    est.add_column("bound")
    for d in report.devices:
        est.add_row(
            f"cuda:{d.index}",
            seconds_text(d.estimated_step_seconds),
            str(d.steps),
            seconds_text(d.estimated_total_seconds),
            d.bound or "-",
        )
    console.print(est)
    for a in report.assumptions:
        console.print(f"  assumes: {a}", style="dim")

    if report.processes:
        procs = Table(title="Processes the script started (each simulated on its own)",
                      title_justify="left")  # fmt: skip
        for col in ("process", "start", "exit", "peak allocated per GPU", "verdict"):
            procs.add_column(col)
        for row in process_rows(report):
            procs.add_row(*(escape(cell) for cell in row))
        console.print(procs)
    if report.files:
        console.print("Files the script saved from simulated tensors:")
        for line in file_lines(report):
            console.print(f"  • {line}", markup=False)
        console.print(
            "  (the rule: docs/sim.md, 'Files the script saves'; torch.load of a redirected "
            "path in the same run reads the copy; --write-files writes every file in place)",
            style="dim",
        )
    if report.notes:
        console.print("Notes (what the simulator approximated or could not model):")
        for n in report.notes:
            console.print(f"  • {n['text']}" + (f" (×{n['count']})" if n["count"] > 1 else ""))
    if report.error:
        e = report.error
        where = f" at {e['file']}:{e['line']}" if e.get("file") else ""
        console.print(f"[bold red]error{where}:[/] {e['type']}: {e['message']}")
        _print_advice(console, e.get("lint", []), "the error", e.get("line"))


def _print_advice(
    console: Console, findings: list[dict[str, Any]], what: str, line: int | None
) -> None:
    """The linter's rule behind an event, with its fix (``torchplace lint`` finds it too)."""
    for f in findings:
        at = "" if f["line"] == line else f" at line {f['line']}"
        console.print(f"  {what}: {f['code']}{at} — {f['hint']} ({f['doc']})")


def print_report(report: SimReport, *, file: Any = None) -> None:
    """Print ``report`` as tables to ``file`` (stdout by default)."""
    from rich.console import Console

    out = file or sys.stdout
    width = None if out.isatty() else 120  # pipes and files get whole tables
    render(report, Console(file=out, highlight=False, width=width))


def render_find_max(token: str, results: dict[str, Any], console: Console) -> None:
    """The table of ``torchplace sim --find-max``: each size tried, and the answer per GPU."""
    from rich.table import Table

    for key, result in results.items():
        table = Table(title=f"{token} on {key} (margin {result.margin:.0%})", title_justify="left")
        for col in ("size", "peak allocated", "peak reserved", "step time (est.)", "per second",
                    "verdict"):  # fmt: skip
            table.add_column(col, justify="left" if col == "verdict" else "right")
        for p in result.probes:
            fits = p.fits(result.margin)
            verdict = (
                "[green]fits[/]"
                if fits
                else ("[bold red]out of memory[/]" if p.oom else "[yellow]over the margin[/]")
            )
            table.add_row(
                str(p.size),
                format_bytes(p.peak_allocated_bytes),
                format_bytes(p.peak_reserved_bytes),
                seconds_text(p.step_seconds),
                f"{p.per_second:,.0f}" if p.per_second else "-",
                verdict,
            )
        console.print(table)
        if result.stopped:
            console.print(f"  [bold red]{key}: the search stopped, {result.stopped}.[/]")
            if result.largest is None:
                console.print(f"  {key}: no size measured fits.")
            else:
                above = result.untried_above
                if above == result.largest + 1:
                    console.print(
                        f"  {key}: the largest {token} that fits is {result.largest} "
                        f"({above} does not)."
                    )
                else:
                    between = (
                        f"sizes {result.largest + 1} to {above - 1} were not tried"
                        if above is not None
                        else "larger sizes were not tried"
                    )
                    console.print(
                        f"  {key}: of the sizes measured, the largest {token} that fits is "
                        f"{result.largest} — a lower bound, not the answer ({between})."
                    )
        elif result.largest is None:
            console.print(f"  {key}: not even {token} = {result.probes[0].size} fits.")
        else:
            more = " (the largest size tried; --max caps the search)" if result.capped else ""
            console.print(
                f"  [bold]{key}: the largest {token} that fits is {result.largest}[/]{more}"
            )
