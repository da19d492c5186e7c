"""How big and how fast the HTML report of a 7B training step is (issue 11: under 1 s).

Simulates the Llama 7B of bench_sim.py (6.74B parameters, bf16, AdamW, batch 1 × 2048
tokens) on an H100 with placeholder values for ``--steps`` steps, builds the memory
timeline (:mod:`torchplace.sim.timeline`) and the page (:mod:`torchplace.sim.html`),
then loads the page in headless Chromium at 1280×800 (tests/chromium.py) ``--loads``
times. Printed: allocation events, points kept per device, timeline and page build time,
page size, the page's own load time (navigation start to the load event; median), its
console errors and network requests, and whether the peak on the page is the report's.

Run:
    .venv/bin/python benchmarks/bench_report_page.py [--steps 2] [--loads 5]
        [--out report-7b.html] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import bench_sim
import chromium

__all__ = ["main"]

_GOAL_SECONDS = 1.0


def measure(*, steps: int, loads: int, out: Path) -> dict[str, Any]:
    from torchplace.sim import simulate
    from torchplace.sim.html import write_html

    spec = bench_sim.MODELS["llama7b"]
    with simulate("H100", values="placeholder") as report:
        with torch.device("cuda"):
            model = spec.build()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        idx = torch.randint(0, spec.vocab, (spec.batch, spec.tokens), device="cuda")
        targets = torch.randint(0, spec.vocab, (spec.batch * spec.tokens,), device="cuda")
        for _ in range(steps):
            bench_sim._step(model, opt, idx, targets)
    report.script = "Llama 7B training step (benchmarks/bench_sim.py)"
    start = time.perf_counter()
    report.add_timelines()
    timeline_seconds = time.perf_counter() - start
    start = time.perf_counter()
    write_html(report, out)
    page_seconds = time.perf_counter() - start
    visits = [
        chromium.visit(
            out,
            expressions={
                "peak": "document.getElementById('peak-0').dataset.peakBytes",
                "areas": "document.querySelectorAll('svg.chart polygon').length",
            },
        )
        for _ in range(loads)
    ]
    t = report.timelines[0]
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": steps,
        "events": t["events"],
        "points": len(t["seq"]),
        "timeline_seconds": timeline_seconds,
        "page_build_seconds": page_seconds,
        "page_bytes": out.stat().st_size,
        "load_seconds": [v.load_seconds for v in visits],
        "median_load_seconds": statistics.median(v.load_seconds for v in visits),
        "console": visits[0].console,
        "requests": visits[0].requests,
        "peak_on_page": int(visits[0].values["peak"]),
        "peak_in_report": report.device(0).peak_allocated_bytes,
        "peak_allocated_gib": report.device(0).peak_allocated_bytes / 1024**3,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if chromium.find_chromium() is None:
        print("error: this benchmark needs chromium on PATH (apt-get install chromium)")
        return 2
    out = args.out or Path(tempfile.mkdtemp()) / "report-7b.html"
    r = measure(steps=args.steps, loads=args.loads, out=out)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    ok = r["median_load_seconds"] < _GOAL_SECONDS and r["peak_on_page"] == r["peak_in_report"]
    print(
        f"Llama 7B ({r['parameters'] / 1e9:.2f}B, bf16, AdamW), {r['steps']} step(s), "
        f"simulated H100, placeholder values\n"
        f"  allocation events: {r['events']:,}; points kept for display: {r['points']:,}\n"
        f"  timeline built in {r['timeline_seconds']:.2f} s, page in "
        f"{r['page_build_seconds']:.2f} s; page size {r['page_bytes'] / 1024:.0f} KiB\n"
        f"  chromium load (navigation start → load event), median of {len(r['load_seconds'])}: "
        f"{r['median_load_seconds'] * 1000:.0f} ms (goal < {_GOAL_SECONDS * 1000:.0f} ms)\n"
        f"  console errors: {len(r['console'])}; network requests: {len(r['requests'])}\n"
        f"  peak on the page {r['peak_on_page']} B = report {r['peak_in_report']} B "
        f"({r['peak_allocated_gib']:.2f} GiB): {r['peak_on_page'] == r['peak_in_report']}\n"
        f"  {'OK' if ok else 'GOAL MISSED'}; page: {out}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
