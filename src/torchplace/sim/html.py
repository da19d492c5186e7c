"""A simulated run as one self-contained HTML page: ``torchplace sim --html report.html``.

The page is drawn from the same :class:`~torchplace.sim.report.SimReport` as ``--json``
(its ``to_dict()`` form), so the two cannot disagree. It needs nothing at view time —
no scripts, fonts or styles from the network (its Content-Security-Policy forbids any
request) — and shows, per simulated GPU or rank: the memory timeline (allocated stacked
by category, reserved as a line, the allocator's limit, the peak, the optimizer steps,
an out-of-memory point), what was live at the peak with the lines that made the largest
blocks; then transfers and synchronisations by file and line, and the estimated time.

Built with plain string formatting rather than a template engine: the page is a few
tables and one SVG per device, every value passes through :func:`html.escape` in one
place (:func:`_e`), and torchplace gains no dependency. The chart is inline SVG computed
here (it shows with scripts off, and in the screenshot); a small inline script only adds
the hover read-out from the chart's points, embedded as JSON.

Examples:
    >>> import torch, torchplace
    >>> from torchplace.sim.html import render_html
    >>> with torchplace.simulate("H100", values="placeholder") as report:
    ...     x = torch.empty(1024, 1024, device="cuda")
    >>> report.add_timelines()
    >>> page = render_html(report)
    >>> page.startswith("<!doctype html>"), "<svg" in page, "http://" in page
    (True, True, False)
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchplace._units import format_bytes
from torchplace.sim.summary import (
    Table,
    device_table,
    file_lines,
    live_table,
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
from torchplace.sim.timeline import COLOURS, sections, unit

if TYPE_CHECKING:
    from torchplace.sim.report import SimReport

__all__ = ["render_html", "write_html"]

_W, _H = 1180, 340  # the chart's drawing size (px); it scales down with the window
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 24, 42


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _where(file: str | None, line: int | None) -> str:
    return place(file, line) if file else "-"


def write_html(report: SimReport, path: str | Path) -> None:
    """Write :func:`render_html` of ``report`` to ``path``, whole or not at all."""
    from torchplace._output import write_atomic

    write_atomic(path, render_html(report).encode())


def render_html(report: SimReport) -> str:
    """The page (see the module docstring); timelines come from ``report.timelines``."""
    secs = sections(report)
    body = [_header(report)]
    if report.plan:
        body.append(
            _section_of(
                plan_table(report.plan, report.costs), "the timelines below are of the first run"
            )
        )
    body += [_section_of(t) for t in rank_tables(report)]
    if not report.ranks:
        body += [_section_of(device_table(report)), _section_of(live_table(report))]
    data = []
    for n, s in enumerate(secs):
        body.append(_section(n, s, report))
        t = s["timeline"]
        data.append(None if t is None else _points(t))
    body.append(_moves(report))
    if not report.ranks:
        body.append(_section_of(time_table(report)))
    if report.processes:
        body.append(_section_of(process_table(report)))
    body += [_files(report), _notes(report)]
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return _PAGE.format(
        title=_e(f"torchplace sim — {report.script or 'built-in example'}"),
        css=_CSS,
        body="\n".join(body),
        data=payload,
        js=_JS,
    )


def _header(report: SimReport) -> str:
    gpu = report.gpu.get("torch_name") or report.gpu.get("name", "?")
    n = len(report.devices)
    v = verdict(report)
    cls = {True: "good", False: "bad", None: "dim"}[v.ok]
    details = "".join(f"<p class='dim'>{_e(line)}</p>" for line in v.details)
    return (
        f"<header><h1>{_e(report.script or 'built-in example')} on {n} × simulated {_e(gpu)}"
        f"</h1><p class='verdict {cls}'>{_e(v.text)}</p>{details}<p class='dim'>torchplace sim · "
        f"values: {_e(report.values)} · torch {_e(report.torch_version)}"
        + (f" · exit code {_e(report.exit_code)}" if report.exit_code is not None else "")
        + " · sizes in GiB = 1024³ bytes (MiB = 1024² bytes)</p>"
        + (
            f"<p class='error'>{_e(report.error['type'])}: {_e(report.error['message'])}</p>"
            if report.error
            else ""
        )
        + "</header>"
    )


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """A table; ``rows`` hold HTML already escaped."""
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='{cls}'><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def _section_of(table: Table, note: str | None = None) -> str:
    """A :class:`~torchplace.sim.summary.Table` as the terminal shows it, as HTML."""
    where = table.columns.index("verdict") if "verdict" in table.columns else -1
    rows = []
    for row in table.rows:
        cells = [_e(c) for c in row]
        if where >= 0:
            cells[where] = f"<span class='{verdict_class(row[where])}'>{cells[where]}</span>"
        rows.append(cells)
    notes = [*table.notes, *([note] if note else [])]
    return (
        f"<section><h2>{_e(table.title)}</h2>"
        + _table(table.columns, rows, "num")
        + "".join(f"<p class='dim'>{_e(line)}</p>" for line in notes)
        + "</section>"
    )


def _section(n: int, s: dict[str, Any], report: SimReport) -> str:
    t = s["timeline"]
    peak = s["peak_allocated_bytes"]
    summary = (
        f"<p class='summary'>peak allocated <b class='peak' data-bytes='{peak}'>"
        f"{_e(format_bytes(peak))}</b> · peak reserved {_e(format_bytes(s['peak_reserved_bytes']))}"
        f" · capacity {_e(format_bytes(s['capacity_bytes']))} (the allocator may use "
        f"{_e(format_bytes(s['limit_bytes']))}: capacity − CUDA context) · "
        f"<span class='{verdict_class(s['verdict'])}'>{_e(s['verdict'])}</span>"
        f" · step (est.) {_e(seconds_text(s['step_seconds']))}</p>"
    )
    if t is None:
        chart = "<p class='dim'>No timeline: the run recorded none (its process died).</p>"
        live = ""
    else:
        chart = _chart(n, s, t, report) + (
            f"<div class='hover' id='hover-{n}'>Move over the chart to see what was live; "
            "click to pin.</div>"
        )
        live = _live(s, t)
    return f"<section class='device'><h2>{_e(s['title'])}</h2>{summary}{chart}{live}</section>"


def _ticks(top: float) -> list[float]:
    """About five round values from 0 to ``top`` (1, 2 or 5 × a power of ten)."""
    if top <= 0:
        return [0.0]
    raw = top / 5
    power = 10 ** int(f"{raw:e}".split("e")[1])
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(top / step) + 1)]


def _chart(n: int, s: dict[str, Any], t: dict[str, Any], report: SimReport) -> str:
    seq = t["seq"]
    lo, hi = seq[0], max(seq[-1], seq[0] + 1)
    top_data = max(max(t["reserved"]), max(t["total"]), 1)
    limit = s["limit_bytes"]
    show_limit = limit <= 2 * top_data  # else the run would be a sliver at the bottom
    top = max(top_data, limit if show_limit else 0) * 1.08
    name, scale = unit(top)
    pw, ph = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(q: float) -> float:
        return round(_LEFT + (q - lo) / (hi - lo) * pw, 1)

    def y(b: float) -> float:
        return round(_TOP + ph - b / top * ph, 1)

    parts = []
    for v in _ticks(top / scale):
        yy = y(v * scale)
        parts.append(
            f"<line class='grid' x1='{_LEFT}' x2='{_LEFT + pw}' y1='{yy}' y2='{yy}'/>"
            f"<text class='tick' x='{_LEFT - 6}' y='{yy + 4}' text-anchor='end'>{v:g}</text>"
        )
    parts.append(
        f"<text class='axis' x='14' y='{_TOP + ph / 2}' transform='rotate(-90 14 "
        f"{_TOP + ph / 2})' text-anchor='middle'>{name} (1 {name} = {scale} B)</text>"
    )
    below = [0] * len(seq)
    for cat, values in t["allocated"].items():
        above = [a + b for a, b in zip(below, values, strict=True)]
        pts = [f"{x(q)},{y(v)}" for q, v in zip(seq, above, strict=True)]
        pts += [f"{x(q)},{y(v)}" for q, v in zip(reversed(seq), reversed(below), strict=True)]
        parts.append(
            f"<polygon class='area' fill='{COLOURS[cat]}' points='{' '.join(pts)}'>"
            f"<title>{_e(cat.replace('_', ' '))}</title></polygon>"
        )
        below = above
    reserved = " ".join(f"{x(q)},{y(v)}" for q, v in zip(seq, t["reserved"], strict=True))
    parts.append(f"<polyline class='reserved' points='{reserved}'/>")
    step_labels = len(t["steps"]) <= 20
    for k, q in enumerate(t["steps"], 1):
        if lo <= q <= hi:
            parts.append(
                f"<line class='step' x1='{x(q)}' x2='{x(q)}' y1='{_TOP}' y2='{_TOP + ph}'/>"
            )
            if step_labels:
                end = x(q) > _LEFT + pw - 50  # near the right edge: the label goes left
                parts.append(
                    f"<text class='tick' x='{x(q) + (-3 if end else 3)}' y='{_TOP + 10}' "
                    f"text-anchor='{'end' if end else 'start'}'>step {k}</text>"
                )
    if show_limit:
        parts.append(
            f"<line class='limit' x1='{_LEFT}' x2='{_LEFT + pw}' y1='{y(limit)}' y2='{y(limit)}'/>"
            f"<text class='tick' x='{_LEFT + 4}' y='{y(limit) - 5}'>"
            f"capacity − CUDA context: {_e(format_bytes(limit))}</text>"
        )
    else:
        parts.append(
            f"<text class='tick' x='{_LEFT + pw - 4}' y='{_TOP - 8}' text-anchor='end'>capacity "
            f"− CUDA context ({_e(format_bytes(limit))}) is far above: the axis is zoomed to "
            "the run</text>"
        )
    for oom in t["ooms"]:
        xo = x(oom["seq"])
        parts.append(
            f"<line class='oom' x1='{xo}' x2='{xo}' y1='{_TOP}' y2='{_TOP + ph}'/>"
            f"<text class='oomtext' x='{xo - 4}' y='{_TOP + 26}' text-anchor='end'>out of memory: "
            f"{_e(format_bytes(oom['requested_bytes']))} more at "
            f"{_e(_where(oom['file'], oom['line']))}</text>"
        )
    err = report.error
    if err and not t["ooms"] and err.get("type") != "OutOfMemoryError":
        xe = x(seq[-1])
        parts.append(
            f"<line class='oom' x1='{xe}' x2='{xe}' y1='{_TOP}' y2='{_TOP + ph}'/>"
            f"<text class='oomtext' x='{xe - 4}' y='{_TOP + 26}' text-anchor='end'>the script "
            f"stopped here: {_e(err['type'])} at {_e(_where(err.get('file'), err.get('line')))}"
            "</text>"
        )
    p = t["peak"]
    px, py = x(p.get("seq", lo)), y(s["peak_allocated_bytes"])
    anchor = "end" if px > _LEFT + pw * 0.8 else "start"
    dx = -8 if anchor == "end" else 8
    parts.append(
        f"<circle class='peakdot' cx='{px}' cy='{py}' r='4.5'/>"
        f"<text class='peaklabel' id='peak-{n}' data-peak-bytes='{s['peak_allocated_bytes']}' "
        f"x='{px + dx}' y='{max(py - 8, _TOP + 12)}' text-anchor='{anchor}'>peak "
        f"{_e(format_bytes(s['peak_allocated_bytes']))}</text>"
    )
    parts.append(_x_axis(t, x, pw))
    parts.append(
        f"<line class='cursor' id='cursor-{n}' x1='-9' x2='-9' y1='{_TOP}' y2='{_TOP + ph}'/>"
    )
    legend = "".join(
        f"<span><i style='background:{COLOURS[c]}'></i>{_e(c.replace('_', ' '))}</span>"
        for c in t["allocated"]
    )
    legend += "<span><i class='line'></i>reserved</span><span><i class='dash'></i>limit</span>"
    if t["truncated"]:
        legend += "<span class='bad'>the trace hit its size limit: the timeline ends early</span>"
    geometry = f"data-lo='{lo}' data-hi='{hi}' data-left='{_LEFT}' data-width='{pw}'"
    return (
        f"<svg class='chart' id='chart-{n}' data-i='{n}' {geometry} viewBox='0 0 {_W} {_H}' "
        f"role='img' aria-label='memory timeline of {_e(s['title'])}'>{''.join(parts)}</svg>"
        f"<div class='legend'>{legend}</div>"
    )


def _x_axis(t: dict[str, Any], x: Any, pw: float) -> str:
    """Six ticks along the run, labelled with the event number and the estimated time."""
    seq, secs = t["seq"], t["seconds"]
    out = []
    for k in range(6):
        i = round(k * (len(seq) - 1) / 5)
        xx = x(seq[i])
        anchor = "start" if k == 0 else "end" if k == 5 else "middle"
        out.append(
            f"<text class='tick' x='{xx}' y='{_H - _BOTTOM + 16}' text-anchor='{anchor}'>"
            f"{_e(seconds_text(secs[i]))}</text>"
        )
    out.append(
        f"<text class='axis' x='{_LEFT + pw / 2}' y='{_H - 6}' text-anchor='middle'>"
        f"allocation events in run order ({t['events']:,}), labelled with the estimated GPU "
        "time</text>"
    )
    return "".join(out)


def _points(t: dict[str, Any]) -> dict[str, Any]:
    """What the hover read-out needs of a timeline."""
    keys = ("seq", "seconds", "reserved", "total", "allocated", "modules", "module_names")
    return {k: t[k] for k in keys}


def _live(s: dict[str, Any], t: dict[str, Any]) -> str:
    """What was live at this GPU's peak: by category and by module (the report's figures,
    as in the tables above), and the largest blocks with the lines that made them."""
    cats = [
        [f"<i class='sw' style='background:{COLOURS[c]}'></i>{_e(c.replace('_', ' '))}",
         _e(format_bytes(b))]
        for c, b in s["peak_breakdown"].items()
        if b
    ]  # fmt: skip
    modules = s.get("activations_by_module") or t["peak"].get("activations_by_module", {})
    mods = [[_e(m), _e(format_bytes(b))] for m, b in modules.items()]
    big = [
        [
            _e(format_bytes(b["bytes"])),
            _e(b["category"].replace("_", " ")),
            _e(b["module"] or "-"),
            f"<code>{_e(_where(b['file'], b['line']))}</code>",
        ]
        for b in t["peak"].get("largest", [])
    ]
    return (
        "<div class='live'><div><h3>Live at the peak</h3>"
        + _table(["category", "bytes"], cats, "num")
        + "</div><div><h3>Activations by module</h3>"
        + (_table(["module", "bytes"], mods, "num") if mods else "<p class='dim'>none</p>")
        + "</div><div><h3>Largest blocks at the peak</h3>"
        + _table(["bytes", "category", "module", "made at"], big, "num")
        + "</div></div>"
    )


def _moves(report: SimReport) -> str:
    """The transfers and syncs table the terminal shows, and the transfers by line."""
    names = {"h2d": "host → device", "d2h": "device → host", "d2d": "device → device"}
    rows = [
        [_e(names.get(s["kind"], s["kind"])), f"<code>{_e(_where(s['file'], s['line']))}</code>",
         _e(s["count"]), _e(format_bytes(s["bytes"]))]
        for s in report.transfer_sites[:20]
    ]  # fmt: skip
    by_line = (
        "<h3>Transfers by file and line</h3>"
        + _table(["what", "where", "count", "bytes"], rows, "num")
        if rows
        else ""
    )
    table = _section_of(moves_table(report))
    return table.replace("</section>", by_line + "</section>")


def _files(report: SimReport) -> str:
    if not report.files:
        return ""
    items = "".join(f"<li>{_e(line)}</li>" for line in file_lines(report))
    return (
        "<section><h2>Files the script saved from simulated tensors</h2>"
        f"<ul>{items}</ul><p class='dim'>The rule: docs/sim.md, 'Files the script saves'.</p>"
        "</section>"
    )


def _notes(report: SimReport) -> str:
    if not report.notes:
        return ""
    items = "".join(
        f"<li>{_e(n['text'])}" + (f" (×{n['count']})" if n["count"] > 1 else "") + "</li>"
        for n in report.notes
    )
    return f"<section><h2>Notes</h2><ul>{items}</ul></section>"


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{css}</style></head>
<body>{body}
<script type="application/json" id="timelines">{data}</script>
<script>{js}</script></body></html>
"""

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;
max-width:1220px;padding:12px 20px;color:#1a1a1a}
h1{font-size:20px;margin:4px 0}h2{font-size:17px;margin:18px 0 4px}h3{font-size:14px;margin:6px 0}
.dim{color:#555;margin:2px 0}.good{color:#006b4f;font-weight:600}.bad{color:#a33a00;font-weight:600}
.verdict{font-size:16px;margin:2px 0}.error{background:#fbeee6;padding:6px;white-space:pre-wrap}
.summary{margin:2px 0 6px}.peak{font-size:15px}
table{border-collapse:collapse;margin:4px 0}td,th{padding:2px 10px;border-bottom:1px solid #ddd;
text-align:left}table.num td:not(:first-child){text-align:right}
svg.chart{width:100%;height:auto;display:block;background:#fff;cursor:crosshair}
.grid{stroke:#e4e4e4}.tick{font-size:12px;fill:#333}.axis{font-size:12px;fill:#333}
.area{stroke:none}.reserved{fill:none;stroke:#000;stroke-width:1.4}
.step{stroke:#888;stroke-dasharray:2 3}.limit{stroke:#333;stroke-width:1.5;stroke-dasharray:7 4}
.oom{stroke:#a33a00;stroke-width:2.5}.oomtext{font-size:13px;font-weight:600;fill:#a33a00}
.peakdot{fill:#fff;stroke:#000;stroke-width:2}.peaklabel{font-size:14px;font-weight:700}
.cursor{stroke:#000;stroke-width:1}
.legend span{margin-right:14px;white-space:nowrap}.legend i,.sw{display:inline-block;width:12px;
height:12px;margin-right:4px;vertical-align:-1px}.legend i.line{height:2px;background:#000;
vertical-align:3px}.legend i.dash{height:0;border-top:2px dashed #333;vertical-align:3px}
.hover{min-height:42px;white-space:pre-line;background:#f6f6f6;padding:4px 8px;margin:4px 0;
font-size:13px}
.live{display:flex;gap:28px;flex-wrap:wrap}code{font-size:12px}
"""

# The hover read-out: the nearest kept point to the pointer, from the embedded JSON.
# Names come from the user's code, so the read-out is built as text, never as HTML.
_JS = """
const data = JSON.parse(document.getElementById('timelines').textContent);
const gib = b => b >= 1073741824 ? (b / 1073741824).toFixed(2) + ' GiB'
  : (b / 1048576).toFixed(1) + ' MiB';
const time = s => s >= 1 ? s.toFixed(2) + ' s' : (s * 1e3).toFixed(2) + ' ms';
document.querySelectorAll('svg.chart').forEach(svg => {
  const t = data[+svg.dataset.i], box = document.getElementById('hover-' + svg.dataset.i);
  const cursor = document.getElementById('cursor-' + svg.dataset.i);
  const lo = +svg.dataset.lo, hi = +svg.dataset.hi, left = +svg.dataset.left;
  const width = +svg.dataset.width, vb = svg.viewBox.baseVal.width;
  let pinned = false;
  const nearest = e => {
    const r = svg.getBoundingClientRect();
    const q = lo + ((e.clientX - r.left) * vb / r.width - left) / width * (hi - lo);
    let a = 0, b = t.seq.length - 1;
    while (b - a > 1) { const m = (a + b) >> 1; if (t.seq[m] <= q) a = m; else b = m; }
    return Math.abs(t.seq[a] - q) <= Math.abs(t.seq[b] - q) ? a : b;
  };
  const show = i => {
    const x = left + (t.seq[i] - lo) / (hi - lo) * width;
    cursor.setAttribute('x1', x); cursor.setAttribute('x2', x);
    const parts = Object.entries(t.allocated).filter(([, v]) => v[i] > 0)
      .map(([c, v]) => c.replace('_', ' ') + ' ' + gib(v[i]));
    const mods = t.modules[i].map(([m, b]) => t.module_names[m] + ' ' + gib(b));
    box.textContent = 'event ' + t.seq[i] + ' · ' + time(t.seconds[i]) + ' · allocated '
      + gib(t.total[i]) + ' · reserved ' + gib(t.reserved[i]) + '\\n' + parts.join(' · ')
      + (mods.length ? '\\nactivations by module: ' + mods.join(' · ') : '')
      + (pinned ? '  (pinned: click to release)' : '');
  };
  svg.addEventListener('mousemove', e => { if (!pinned) show(nearest(e)); });
  svg.addEventListener('click', e => { pinned = !pinned; show(nearest(e)); });
});
"""
