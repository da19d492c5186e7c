"""What a simulation found: a report object, its versioned JSON form and its rich table."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from torchplace._units import format_bytes
from torchplace.sim import _advice
from torchplace.sim.summary import (
    Table,
    device_table,
    device_verdict,
    file_lines,
    live_table,
    module_lines,
    moves_table,
    place,
    plan_table,
    process_table,
    rank_tables,
    seconds_text,
    time_table,
    verdict,
    verdict_class,
)
from torchplace.sim.timeline import live_at_peak, timeline
from torchplace.timemodel.step import summarize

if TYPE_CHECKING:
    from rich.console import Console

    from torchplace.sim.accounting._state import SimState

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
    #: the step's time, range, bound, GPU and host split and throughput
    #: (:func:`torchplace.timemodel.step.summarize`); empty without two steps
    step: dict[str, Any] = field(default_factory=dict)


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
    #: which values the run held, and why: ``{"requested": "auto", "ran": "real" |
    #: "placeholder", "reason": ..., "placeholder_from": {"file", "line"} or None}``
    values_decision: dict[str, Any] | None = None
    assumptions: list[str] = field(default_factory=list)
    #: ``--price``: the hourly prices given, the cost of 1,000 steps per GPU model
    #: (``usd_per_1000_steps``) and the priced GPUs that were not simulated
    costs: dict[str, Any] = field(default_factory=dict)
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
            peak = live_at_peak(state, dev.index)
            if peak is None:  # the trace stopped growing: the last breakdown taken (≤1% off)
                breakdown, modules = dict(dev.peak_breakdown), dict(dev.peak_scopes)
                self.notes.append(
                    {
                        "text": f"cuda:{dev.index}: what was live at the peak is from the "
                        "last breakdown taken (within 1% of the peak): the run's trace hit "
                        "its size limit",
                        "count": 1,
                    }
                )
            else:
                breakdown, modules = peak["by_category"], peak["activations_by_module"]
            est = dev.estimate
            assert est is not None  # simulate() gives every device its estimate
            step = summarize(dev.time_marks, dev.call_marks, est.total.seconds_by_bound)
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
                    peak_breakdown=breakdown,
                    peak_activations_by_module=modules,
                    estimated_step_seconds=step.get("step_seconds"),
                    estimated_total_seconds=est.seconds,
                    steps=step.get("steps", 0),
                    bound=step.get("bound") or (est.total.bound if est.total.seconds else None),
                    estimate=est.to_dict(),
                    step=step,
                )
            )
        self.conclude()


def draw(table: Table, console: Console) -> None:
    """Draw a :class:`~torchplace.sim.summary.Table` in the terminal: the title on a line
    of its own, headers and numbers never cut. A table too wide for the terminal even with
    its headers and text wrapped between words is drawn one row per paragraph instead
    (``column value · column value ...``)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table as RichTable

    console.print(table.title, style="bold", markup=False)
    where = table.columns.index("verdict") if "verdict" in table.columns else -1
    widths = []
    for n, col in enumerate(table.columns):
        number = col in table.right
        cells = [row[n] if number else word for row in table.rows for word in row[n].split()]
        widths.append(max(len(w) for w in [*col.split(), *cells]))
    if sum(widths) + 2 * len(widths) > console.width:
        for row in table.rows:
            parts = [f"{col} {cell}" for col, cell in zip(table.columns[1:], row[1:], strict=True)]
            console.print(f"{table.columns[0]} {row[0]}: " + " · ".join(parts), markup=False)
    else:
        roomy = (
            sum(max(w, len(c)) for w, c in zip(widths, table.columns, strict=True))
            + 2 * len(widths)
            <= console.width
        )  # every header fits on one line
        grid = RichTable(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
        for n, col in enumerate(table.columns):
            number = col in table.right
            header = col if roomy or not number else "\n".join(col.split())
            grid.add_column(
                escape(header),
                justify="right" if number else "left",
                min_width=widths[n],
                no_wrap=number,
                overflow="fold",
            )
        for row in table.rows:
            cells = [escape(cell) for cell in row]
            if where >= 0:
                cells[where] = f"[{_STYLE[verdict_class(row[where])]}]{cells[where]}[/]"
            grid.add_row(*cells)
        console.print(grid)
    for line in table.notes:
        console.print(f"  {line}", style="dim", markup=False)


_STYLE = {"good": "green", "dim": "dim", "bad": "bold red"}
_VERDICT_STYLE = {True: "bold green", False: "bold red", None: "bold yellow"}


def render_plan(
    plan: dict[str, Any], console: Console, costs: dict[str, Any] | None = None
) -> None:
    """The table of every GPU a run was replayed on (``torchplace sim --gpu all``); with
    ``--price``, the cost of 1,000 steps, cheapest first."""
    draw(plan_table(plan, costs), console)


def render_ranks(sweep: list[dict[str, Any]], console: Console) -> None:
    """Per-rank memory and time of ``torchplace sim --nproc-per-node`` (one table per world)."""
    for table in rank_tables(SimReport(ranks=sweep)):
        draw(table, console)


def render(report: SimReport, console: Console) -> None:
    """Print the report: the verdict first, then the tables (GiB = 1024³ bytes). A run
    whose own process put nothing on a GPU (a launcher) shows its processes only."""
    if report.plan:
        draw(plan_table(report.plan, report.costs), console)
    for table in rank_tables(report):
        draw(table, console)
    gpu = report.gpu.get("torch_name") or report.gpu.get("name", "?")
    console.print(f"torchplace sim — {len(report.devices)} × simulated {gpu}", style="bold")
    v = verdict(report)
    console.print(f"verdict: {v.text}", style=_VERDICT_STYLE[v.ok], markup=False)
    for line in v.details:
        console.print(f"  {line}", markup=False)
    used = any(d.peak_allocated_bytes for d in report.devices) or any(
        t.get("count") for t in report.transfers.values()
    )
    if used or not report.processes:
        draw(device_table(report), console)
    if used:
        draw(live_table(report), console)
        for line in module_lines(report):
            console.print(f"  {line}", style="dim", markup=False)
        draw(moves_table(report), console)
        draw(time_table(report), console)
    if report.processes:
        draw(process_table(report), console)
    if report.files:
        console.print("Files the script saved from simulated tensors:", style="bold")
        for line in file_lines(report):
            console.print(f"  • {line}", markup=False)
        console.print(
            "  (the rule: docs/sim.md, 'Files the script saves'; torch.load of a redirected "
            "path in the same run reads the copy; --write-files writes every file in place)",
            style="dim",
        )
    if report.notes:
        console.print("Notes (what the simulator approximated or could not model):", style="bold")
        for n in report.notes:
            text = f"  • {n['text']}" + (f" (×{n['count']})" if n["count"] > 1 else "")
            console.print(text, markup=False)
    if report.error:
        e = report.error
        where = f" at {place(e.get('file'), e.get('line'))}" if e.get("file") else ""
        console.print(f"error{where}: {e['type']}: {e['message']}", style="bold red", markup=False)
        for f in e.get("lint", []):
            at = "" if f["line"] == e.get("line") else f" at line {f['line']}"
            console.print(
                f"  the error: {f['code']}{at} — {f['hint']} (torchplace lint finds it in "
                "the source)",
                markup=False,
            )


def print_report(report: SimReport, *, file: Any = None) -> None:
    """Print ``report`` as tables to ``file`` (stdout by default)."""
    from rich.console import Console

    out = file or sys.stdout
    # a terminal's width, or COLUMNS; pipes and files get 120 columns
    width = None if out.isatty() or os.environ.get("COLUMNS") else 120
    render(report, Console(file=out, highlight=False, width=width))


def render_find_max(token: str, results: dict[str, Any], console: Console) -> None:
    """The table of ``torchplace sim --find-max``: each size tried, and the answer per GPU."""
    for key, result in results.items():
        table = Table(
            f"{token} on {key} (margin {result.margin:.0%})",
            ["size", "peak allocated", "peak reserved", "step time (est.)", "per second",
             "verdict"],
            right=frozenset({"size", "peak allocated", "peak reserved", "step time (est.)",
                             "per second"}),
        )  # fmt: skip
        for p in result.probes:
            fits = p.fits(result.margin)
            table.rows.append(
                [
                    str(p.size),
                    format_bytes(p.peak_allocated_bytes),
                    format_bytes(p.peak_reserved_bytes),
                    seconds_text(p.step_seconds),
                    f"{p.per_second:,.0f}" if p.per_second else "-",
                    "fits" if fits else ("out of memory" if p.oom else "over the margin"),
                ]
            )
        draw(table, console)
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
