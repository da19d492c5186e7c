"""Show a :class:`~torchplace.bench.results.BenchResult`: rich tables, or a plot.

Rates are decimal (GB/s = 10⁹ bytes/s, TFLOP/s = 10¹² FLOP/s), as on datasheets;
memory sizes are binary (KiB, MiB, GiB). Projected rows say "projected" in their own
column; measured rows say "measured".

Examples:
    >>> from torchplace.bench.report import format_seconds, format_rate
    >>> format_seconds(0.00123), format_rate(2.5e12, "flops"), format_rate(3.1e10, "bytes")
    ('1.23 ms', '2.5 TFLOP/s', '31 GB/s')
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from torchplace.bench.results import BenchResult, BreakEven, Row
from torchplace.bench.workloads import OPS

__all__ = [
    "PLOT_HINT",
    "format_rate",
    "format_seconds",
    "plot",
    "render",
    "require_matplotlib",
]

PLOT_HINT = "pip install 'torchplace[plot]'"

_TITLES = {
    "elementwise": "elementwise a * b + c (memory-bound)",
    "matmul": "matrix multiply a @ b, both n×n (compute-bound)",
    "conv2d": "conv2d of a batch×channels×n×n input, 3×3 kernel, 64→64 channels, padding 1",
    "copy": "host↔device copies",
}
_PRECISION_ORDER = {"fp32": 0, "tf32": 1, "bf16": 2, "fp16": 3, None: 4}


def format_seconds(s: float | None) -> str:
    """Seconds with a unit that keeps 3 significant digits (µs, ms, s)."""
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def format_rate(value: float, metric: str) -> str:
    """FLOP/s or bytes/s with a decimal prefix that keeps 3 significant digits (G at least)."""
    unit = "FLOP/s" if metric == "flops" else "B/s"
    for prefix, scale in (("P", 1e15), ("T", 1e12)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value / 1e9:.3g} G{unit}"


def _percent(fraction: float) -> str:
    pct = 100 * fraction
    return f"{pct:,.0f}%" if pct >= 100 else f"{pct:.3g}%"


def _group(row: Row) -> str:
    return "copy" if row.op.startswith("copy") else row.op


def _device_order(result: BenchResult) -> dict[str, int]:
    order: dict[str, int] = {"cpu": 0}
    for r in result.rows:
        order.setdefault(r.device, len(order) + (1000 if r.projected else 0))
    return order


def _device_label(row: Row) -> str:
    return row.device_name if row.projected else row.device


def _speedup(value: float | None) -> Text:
    if value is None:
        return Text("-")
    text = f"{value:,.0f}×" if value >= 100 else f"{value:.3g}×"
    return Text(text, style="green" if value >= 1 else "red")


def _op_table(result: BenchResult, group: str, rows: list[Row]) -> Table:
    order = _device_order(result)
    copies = group == "copy"
    table = Table(title=_TITLES[group], title_justify="left", show_edge=False)
    for name, justify in (
        ("size", "right"),
        ("device", "left"),
        ("how", "left"),
        ("memory" if copies else "dtype", "left"),
        ("time (median ± IQR)", "right"),
        ("achieved", "right"),
        ("% of peak", "right"),
        ("bound", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    if not copies:
        table.add_column("speed-up", justify="right")
        table.add_column("with transfer", justify="right")

    def key(r: Row) -> tuple[object, ...]:
        return (
            r.op,
            _PRECISION_ORDER.get(r.precision, 5),
            r.variant or "",
            r.size,
            order[r.device],
        )

    for r in sorted(rows, key=key):
        spread = "" if r.iqr_seconds is None else f" ± {format_seconds(r.iqr_seconds)}"
        peak = "-" if r.peak_fraction is None else _percent(r.peak_fraction)
        if r.peak_fraction is not None and r.peak_source == "measured":
            peak += "*"
        if r.doubt and not r.projected:
            spread += " ?"  # not credible: see the notes
            peak = "?"
        cells: list[str | Text] = [
            r.label,
            _device_label(r),
            Text("projected", style="yellow") if r.projected else Text("measured"),
            f"{r.variant} {r.op[-3:]}" if copies else (r.precision or "-"),
            format_seconds(r.seconds) + spread,
            format_rate(r.achieved, r.metric),
            peak,
            r.bound or "-",
        ]
        if not copies:
            withheld = Text("?", style="yellow") if r.doubt and r.device != "cpu" else None
            cells += [
                withheld or _speedup(r.speedup),
                withheld or _speedup(r.speedup_with_transfer),
            ]
        table.add_row(*cells)
    return table


def _break_even_text(b: BreakEven) -> str:
    def size(n: float) -> str:
        if b.op == "elementwise":
            return f"{n:,.0f} elements per vector"
        what = "matrices" if b.op == "matmul" else "images"
        return f"{n:.0f}×{n:.0f} {what}"

    if b.status == "crossover" and b.size is not None:
        return f"CPU wins below ≈ {size(b.size)}"
    if b.status == "mixed" and b.size is not None:
        return f"accelerator wins from ≈ {size(b.size)} on; below, the winner changes (noise?)"
    if b.status == "accelerator_wins":
        return f"accelerator wins at every size measured (from {size(b.smallest)})"
    if b.status == "cpu_wins":
        return f"CPU wins at every size measured (up to {size(b.largest)})"
    return f"the winner changes more than once between {size(b.smallest)} and {size(b.largest)}"


def _break_even_table(items: Sequence[BreakEven]) -> Table:
    table = Table(
        title="break-even: the size below which the CPU wins once copies are counted",
        title_justify="left",
        show_edge=False,
    )
    for name in ("accelerator", "how", "operation", "dtype", "break-even (with copies)"):
        table.add_column(name)
    for b in sorted(items, key=lambda b: (b.projected, b.device, OPS.index(b.op))):
        dtype = "tf32" if b.tf32 and b.dtype == "fp32" else (b.dtype or "-")
        how = Text("projected", style="yellow") if b.projected else Text("measured")
        label = b.device_name if b.projected else f"{b.device} ({b.device_name})"
        table.add_row(label, how, b.op, dtype, _break_even_text(b))
    return table


def _peaks_table(result: BenchResult) -> Table:
    table = Table(title="peaks compared against", title_justify="left", show_edge=False)
    for name in ("device", "source", "fp32", "tf32", "bf16", "fp16", "memory", "host link"):
        table.add_column(name)
    for label, p in result.peaks.items():
        flops = [
            "-" if k not in p.flops_per_s else format_rate(p.flops_per_s[k], "flops")
            for k in ("fp32", "tf32", "bf16", "fp16")
        ]
        host = p.host_bandwidth_bytes_per_s
        table.add_row(
            p.name if p.measured else f"{p.name} ({label})",
            "measured here" if p.measured else "catalog (datasheet)",
            *flops,
            format_rate(p.bandwidth_bytes_per_s, "bytes"),
            "-" if not host else format_rate(host, "bytes") + " per direction",
        )
    return table


def render(result: BenchResult, console: Console) -> None:
    """Print the peaks, one table per operation, the break-even table and the notes."""
    parts: list[Table | Text] = []
    if result.peaks:
        parts.append(_peaks_table(result))
    groups: dict[str, list[Row]] = {}
    for r in result.rows:
        groups.setdefault(_group(r), []).append(r)
    for group in (*OPS, "copy"):
        if group in groups:
            parts += [Text(""), _op_table(result, group, groups[group])]
    if result.break_even:
        parts += [Text(""), _break_even_table(result.break_even)]
    notes = [
        "* % of a peak measured on this CPU (see notes); GPU rows compare with the catalog. "
        "Above 100% on the CPU: the data fit in its caches, faster than the DRAM copy test.",
        "speed-up = CPU time / this time, same operation, size and dtype.",
        *_doubt_notes(result.rows),
        *result.notes,
    ]
    parts += [Text(""), *(Text(f"- {n}", style="dim") for n in notes)]
    console.print(Group(*parts))


def _doubt_notes(rows: Sequence[Row], most: int = 10) -> list[str]:
    """The rows marked "?" and why (:mod:`torchplace.bench.credibility`)."""
    doubtful = [r for r in rows if r.doubt]
    if not doubtful:
        return []
    lines = [
        f"? {len(doubtful)} row(s) not credible, so their % of peak and the speed-ups "
        "from them are not shown (run again on a quieter machine):"
    ]
    for r in doubtful[:most]:
        what = f"{r.variant} {r.op}" if r.variant else f"{r.op} {r.precision or ''}".strip()
        where = _device_label(r) + (" (projected)" if r.projected else "")
        lines.append(f"  ? {what} {r.label} on {where}: {r.doubt}")
    if len(doubtful) > most:
        lines.append(f"  ... and {len(doubtful) - most} more (--json: each row's 'doubt')")
    return lines


class _MissingExtra(RuntimeError):
    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def require_matplotlib() -> None:
    """Raise a RuntimeError naming the ``pip install`` that fixes it if matplotlib is absent."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        raise _MissingExtra(
            f"plotting needs matplotlib, which is not installed; run {PLOT_HINT}.", PLOT_HINT
        ) from e


def plot(result: BenchResult, path: str | Path) -> Path:
    """Save time against size per device, log-log, one panel per operation, to ``path``.

    Projected rows are dashed and labelled "(projected)".

    Raises:
        RuntimeError: matplotlib is not installed (``pip install 'torchplace[plot]'``).
    """
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [g for g in (*OPS, "copy") if any(_group(r) == g for r in result.rows)]
    if not groups:
        raise ValueError("there is nothing to plot: the run produced no rows.")
    cols = min(2, len(groups))
    nrows = -(-len(groups) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(7 * cols, 5 * nrows), squeeze=False)
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    for ax, group in zip(axes.flat, groups, strict=False):
        series: dict[tuple[str, str, bool], list[Row]] = {}
        for r in result.rows:
            if _group(r) == group:
                what = f"{r.variant} {r.op[-3:]}" if r.variant else (r.precision or "")
                series.setdefault((_device_label(r), what, r.projected), []).append(r)
        for (device, what, projected), rows in series.items():
            rows.sort(key=lambda r: r.size)
            label = f"{device} {what}" + (" (projected)" if projected else "")
            ax.loglog(
                [r.size for r in rows],
                [r.seconds for r in rows],
                "--" if projected else "-",
                marker="o",
                markersize=3,
                label=label,
            )
        unit = {"elementwise": "elements", "matmul": "matrix side", "conv2d": "image side"}
        ax.set_xlabel(unit.get(group, "bytes copied"))
        ax.set_ylabel("seconds (median)")
        ax.set_title(_TITLES[group], fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
