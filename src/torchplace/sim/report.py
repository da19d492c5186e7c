"""What a simulation found: a report object, its versioned JSON form and its rich table."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from torchplace.memory import format_bytes

if TYPE_CHECKING:
    from rich.console import Console

    from torchplace.sim._state import SimState

__all__ = ["SCHEMA_VERSION", "DeviceReport", "SimReport", "render"]

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
    syncs: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int | None = None
    script: str | None = None
    torch_version: str = ""
    assumptions: list[str] = field(default_factory=list)

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

    def fill(self, state: SimState, step_marks: list[list[float]]) -> None:
        """Copy what ``state`` recorded into this report.

        ``step_marks[i]`` holds device ``i``'s estimated seconds at the start and after
        every ``optimizer.step()``; a step's time is the median of the differences.
        """
        state.sync()
        self.oom = (
            None
            if state.oom is None
            else {k: state.oom[k] for k in ("device", "requested_bytes", "file", "line")}
        )
        self.transfers = {k: {"count": v[0], "bytes": v[1]} for k, v in state.transfers.items()}
        self.syncs = [
            {"kind": kind, "file": file, "line": line, "count": n}
            for (kind, file, line), n in sorted(state.syncs.items(), key=lambda kv: -kv[1])
        ]
        self.notes = [{"text": t, "count": n} for t, n in state.notes.most_common()]
        self.devices = []
        for dev, est, marks in zip(state.devices, state.estimates, step_marks, strict=True):
            deltas = [b - a for a, b in itertools.pairwise(marks)]
            alloc = dev.allocator
            verdict = "fits"
            if state.oom is not None and state.oom["device"] == dev.index:
                where = f" at {state.oom['file']}:{state.oom['line']}" if state.oom["file"] else ""
                verdict = f"out of memory{where}"
            self.devices.append(
                DeviceReport(
                    index=dev.index,
                    name=dev.spec.torch_name,
                    capacity_bytes=dev.capacity,
                    context_bytes=dev.context_bytes,
                    peak_allocated_bytes=dev.peak_allocated,
                    peak_reserved_bytes=alloc.peak_reserved_bytes,
                    headroom_bytes=dev.capacity - dev.context_bytes - alloc.peak_reserved_bytes,
                    verdict=verdict,
                    peak_breakdown=dict(dev.peak_breakdown),
                    peak_activations_by_module=dict(dev.peak_scopes),
                    estimated_step_seconds=statistics.median(deltas) if deltas else None,
                    estimated_total_seconds=est.seconds,
                    steps=len(deltas),
                    bound=est.total.bound if est.total.seconds else None,
                    estimate=est.to_dict(),
                )
            )


def _seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} µs"


def render(report: SimReport, console: Console) -> None:
    """Print the report as rich tables (GiB = 1024³ bytes)."""
    from rich.table import Table

    gpu = report.gpu.get("name", "?")
    title = f"torchplace sim — {len(report.devices)} × simulated {gpu}"
    table = Table(title=title, title_justify="left")
    for col in ("device", "capacity", "peak allocated", "peak reserved", "headroom", "verdict"):
        table.add_column(col, justify="left" if col in ("device", "verdict") else "right")
    for d in report.devices:
        style = "green" if d.verdict == "fits" else "bold red"
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
    cats = ("parameters", "gradients", "optimizer_state", "activations", "other")
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

    est = Table(title="Estimated time (roofline estimate, not a measurement)", title_justify="left")
    est.add_column("device")
    est.add_column("per step", justify="right")
    est.add_column("steps", justify="right")
    est.add_column("whole run", justify="right")
    est.add_column("bound")
    for d in report.devices:
        est.add_row(
            f"cuda:{d.index}",
            _seconds(d.estimated_step_seconds),
            str(d.steps),
            _seconds(d.estimated_total_seconds),
            d.bound or "-",
        )
    console.print(est)
    for a in report.assumptions:
        console.print(f"  assumes: {a}", style="dim")

    if report.notes:
        console.print("Notes (what the simulator approximated or could not model):")
        for n in report.notes:
            console.print(f"  • {n['text']}" + (f" (×{n['count']})" if n["count"] > 1 else ""))
    if report.error:
        e = report.error
        where = f" at {e['file']}:{e['line']}" if e.get("file") else ""
        console.print(f"[bold red]error{where}:[/] {e['type']}: {e['message']}")
