"""One run, three outputs: the terminal, ``--json`` and ``--html`` show the same figures.

They once disagreed on the same run (activations 162.0 vs 164.0 MiB; "(backward)" 10 vs
16 MiB; the JSON breakdown summed to 2.01 MiB less than the peak): each computed what
was live at the peak its own way. Now the report holds one exact breakdown
(torchplace.sim.timeline.live_at_peak) and torchplace.sim.summary formats every figure
once for both the terminal and the page.
"""

from __future__ import annotations

import doctest
import io
import json
from html.parser import HTMLParser
from pathlib import Path

from rich.console import Console

from helpers import run_torchplace
from torchplace._units import format_bytes
from torchplace.sim import summary
from torchplace.sim.report import SimReport, render


class _Tables(HTMLParser):
    """Each table of the page, under the title (h2/h3) before it: a list of rows of text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.title = ""
        self.text: list[str] | None = None
        self.rows: list[list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in ("h2", "h3"):
            self.text = []
        elif tag == "table":
            self.rows = self.tables.setdefault(self.title, [])
        elif tag == "tr" and self.rows is not None:
            self.rows.append([])
        elif tag in ("td", "th"):
            self.text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h2", "h3") and self.text is not None:
            self.title, self.text = "".join(self.text).strip(), None
        elif tag in ("td", "th") and self.text is not None and self.rows:
            self.rows[-1].append("".join(self.text).strip())
            self.text = None
        elif tag == "table":
            self.rows = None

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)


def _terminal_rows(text: str, title: str) -> list[list[str]]:
    """The rows of the terminal table under ``title`` (cells split on 2+ spaces)."""
    lines = text.splitlines()
    start = lines.index(title) + 1
    rows = []
    for line in lines[start + 2 :]:  # the header and the rule
        if not line.strip() or line.startswith("  "):
            break
        rows.append([c for c in line.strip().split("  ") if c.strip()])
    return [[c.strip() for c in row] for row in rows]


def test_terminal_json_and_html_agree_on_one_run(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    r = run_torchplace(
        "sim", "--json", "--html", str(page), "-m", "torchplace.sim.example", "--steps", "4"
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    report = SimReport.from_dict(data)
    out = io.StringIO()
    render(report, Console(file=out, width=200, highlight=False))  # what the terminal shows
    terminal = out.getvalue()
    parser = _Tables()
    parser.feed(page.read_text())
    html = parser.tables

    (dev,) = data["devices"]
    # the breakdown adds up to the peak, exactly
    assert sum(dev["peak_breakdown"].values()) == dev["peak_allocated_bytes"]
    expected = [
        "cuda:0",
        format_bytes(dev["capacity_bytes"]),
        format_bytes(dev["peak_allocated_bytes"]),
        format_bytes(dev["peak_reserved_bytes"]),
        format_bytes(dev["headroom_bytes"]),
        dev["verdict"],
    ]
    assert _terminal_rows(terminal, "Memory per GPU") == [expected]
    assert html["Memory per GPU"][1:] == [expected]

    cats = [c for c, b in dev["peak_breakdown"].items() if b]
    live = {c: format_bytes(dev["peak_breakdown"][c]) for c in cats}
    (term_live,) = _terminal_rows(terminal, "Live at the peak")
    assert term_live[1:-1] == [live[c] for c in summary.categories([dev["peak_breakdown"]])]
    assert term_live[-1] == format_bytes(dev["peak_allocated_bytes"])
    assert html["Live at the peak"][1] == term_live  # the summary table, on the page
    # ... and the GPU's own section lists the same figures by category and by module
    section = {row[0]: row[1] for row in html["Live at the peak"][-len(cats) :]}
    assert section == {c.replace("_", " "): live[c] for c in cats}
    modules = {m: format_bytes(b) for m, b in dev["peak_activations_by_module"].items()}
    assert {row[0]: row[1] for row in html["Activations by module"][1:]} == modules
    shown = terminal.split("cuda:0 activations by module: ")[1].split("\n")[0]
    assert shown == ", ".join(f"{m} {b}" for m, b in list(modules.items())[:5])

    moves = _terminal_rows(terminal, "Transfers and synchronisations")
    assert html["Transfers and synchronisations"][1:] == moves
    h2d = data["transfers"]["h2d"]
    assert moves[0] == ["host → device", str(h2d["count"]), format_bytes(h2d["bytes"])]
    assert _terminal_rows(terminal, "Estimated time (the step-time model, not a measurement)")[0][
        1
    ] == summary.seconds_text(dev["estimated_step_seconds"])
    assert f"verdict: {summary.verdict(report).text}" in terminal
    # one name for the GPU, the one the script reads (torch.cuda.get_device_name)
    assert "NVIDIA H100 80GB HBM3" in terminal and "SXM5" not in terminal
    assert "SXM5" not in page.read_text()
    assert summary.verdict(report).text in page.read_text()


def test_summary_doctests() -> None:
    assert doctest.testmod(summary).failed == 0
