"""The picture of a simulated run: memory timeline, HTML page (checked in headless
Chromium), PNG, and the snapshot PyTorch's own memory viewer reads (issue 11)."""

from __future__ import annotations

import base64
import json
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import chromium
from helpers import run_torchplace
from torchplace import catalog
from torchplace._units import format_bytes
from torchplace.sim import plan, simulate
from torchplace.sim.html import render_html
from torchplace.sim.timeline import timeline

TRAIN = """\
import torch
model = torch.nn.Sequential(
    torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)
).cuda()
opt = torch.optim.AdamW(model.parameters())
for step in range(3):
    x = torch.randn(64, 256, device="cuda")
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(loss.item())
"""


def _train(steps: int = 3) -> Any:
    with simulate("H100", values="placeholder") as report:
        model = torch.nn.Sequential(
            torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)
        ).cuda()
        opt = torch.optim.AdamW(model.parameters())
        for _ in range(steps):
            model(torch.randn(64, 256, device="cuda")).square().mean().backward()
            opt.step()
            opt.zero_grad()
    return report


def test_timeline_agrees_with_the_report_and_keeps_the_peak_when_down_sampled() -> None:
    report = _train()
    dev = report.device(0)
    full = timeline(report.state, 0)
    assert full["peak"]["allocated_bytes"] == max(full["total"]) == dev.peak_allocated_bytes
    assert max(full["reserved"]) == dev.peak_reserved_bytes
    assert len(full["steps"]) == dev.steps == 3
    assert {"parameters", "gradients", "optimizer_state", "activations"} <= set(full["allocated"])
    # the categories stack up to the total at every point
    for i in range(len(full["seq"])):
        assert sum(v[i] for v in full["allocated"].values()) == full["total"][i]
    # what was live at the peak: parameters and optimizer state of this model, made here
    peak = full["peak"]
    assert peak["by_category"]["parameters"] == sum(
        -(-4 * n // 512) * 512 for n in (256 * 1024, 1024, 1024 * 256, 256)
    )
    assert peak["largest"][0]["bytes"] >= peak["largest"][-1]["bytes"]
    assert all(b["file"] == __file__ for b in peak["largest"] if b["category"] != "other")

    small = timeline(report.state, 0, max_points=20)
    assert len(small["seq"]) <= 20 < full["events"]
    assert max(small["total"]) == dev.peak_allocated_bytes  # never the peak
    assert small["seq"] == sorted(small["seq"])


def test_page_has_a_section_per_gpu_the_fits_table_and_escapes_names() -> None:
    with simulate("H100", gpus=2, values="placeholder") as report:
        a = torch.empty(1024, 1024, device="cuda:0")
        b = torch.empty(2048, 1024, device="cuda:1")
        del a, b
    report.notes.append({"text": "<b>not bold</b>", "count": 1})
    gpus = [catalog.lookup("T4"), catalog.lookup("H100")]
    report.plan = {
        "gpus": [r.to_dict() for r in plan.replay_all(report.state, gpus)],
        "runs": [{"gpu": "h100-sxm-80gb", "class": ["t4", "h100-sxm-80gb"]}],
    }
    report.add_timelines()
    page = render_html(report)
    assert page.count("<svg class='chart'") == 2
    assert "cuda:0 — NVIDIA H100 80GB HBM3" in page and "cuda:1 —" in page
    assert "Which GPUs it fits on" in page and "Tesla T4" in page
    assert "&lt;b&gt;not bold&lt;/b&gt;" in page and "<b>not bold</b>" not in page
    for d in report.devices:
        assert f"data-peak-bytes='{d.peak_allocated_bytes}'" in page
    # nothing that would fetch at view time
    assert not re.search(r"(src|href)=|https?://|@import|url\(", page)


def test_failure_point_is_on_the_timeline() -> None:
    with pytest.raises(ValueError), simulate("H100", values="placeholder") as report:
        x = torch.empty(1024, device="cuda")
        raise ValueError("bad batch")
    del x
    report.add_timelines()
    page = render_html(report)
    assert "the script stopped here: ValueError at tests/test_sim_html.py:" in page


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One ``torchplace sim --json --html --snapshot`` run of a small training script."""
    tmp = tmp_path_factory.mktemp("sim-html")
    (tmp / "train.py").write_text(TRAIN)
    (tmp / "out").mkdir()
    r = run_torchplace(
        "sim", "--json", "--html", "out/report.html", "--snapshot", "out/snap.pickle",
        "--values", "placeholder", "train.py", cwd=tmp,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return {"tmp": tmp, "report": json.loads(r.stdout), "stderr": r.stderr}


def test_snapshot_is_read_by_pytorchs_memory_viz(cli_run: dict[str, Any]) -> None:
    from torch.cuda import _memory_viz

    path = cli_run["tmp"] / "out" / "snap.pickle"
    with open(path, "rb") as f:
        snap = pickle.load(f)
    (events,) = snap["device_traces"]
    actions = {e["action"] for e in events}
    assert {"segment_alloc", "alloc", "free_requested", "free_completed"} <= actions
    assert any(e["frames"] and e["frames"][0]["filename"].endswith("train.py") for e in events)
    # PyTorch's viewers: the HTML pages embed the snapshot they were given ...
    for plot in (_memory_viz.trace_plot, _memory_viz.segment_plot):
        page = plot(snap)
        encoded = json.loads(re.search(r"(\[\{\"name\".*?\}\])", page).group(1))[0]["base64"]
        assert pickle.loads(base64.b64decode(encoded)) == snap
    # ... and the text summaries read its segments and trace
    assert f"{len(events)} entries" in _memory_viz.trace(snap)
    peak = cli_run["report"]["devices"][0]["peak_reserved_bytes"]
    assert len(snap["segments"]) > 0 and sum(s["total_size"] for s in snap["segments"]) <= peak
    assert "total_reserved" in _memory_viz.segsum(snap)
    # and python -m torch.cuda._memory_viz trace_plot, as the report tells users
    out = cli_run["tmp"] / "trace.html"
    subprocess.run(
        [sys.executable, "-m", "torch.cuda._memory_viz", "trace_plot", str(path), "-o",
         str(out)], check=True, capture_output=True,
    )  # fmt: skip
    assert out.stat().st_size > 1000
    assert "memory snapshot written to out/snap.pickle" in cli_run["stderr"]


@pytest.mark.skipif(chromium.find_chromium() is None, reason="chromium is not installed")
def test_html_report_in_a_real_browser(cli_run: dict[str, Any]) -> None:
    path = cli_run["tmp"] / "out" / "report.html"
    # hovering the middle of the chart fills the read-out
    hover = (
        "(() => { const s = document.getElementById('chart-0'), r = s.getBoundingClientRect();"
        " s.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + r.width / 2,"
        " clientY: r.top + r.height / 2})); return document.getElementById('hover-0')"
        ".textContent; })()"
    )
    visit = chromium.visit(
        path,
        expressions={
            "areas": "document.querySelectorAll('#chart-0 polygon').length",
            "peak_bytes": "document.getElementById('peak-0').dataset.peakBytes",
            "peak_text": "document.getElementById('peak-0').textContent",
            "hover": hover,
            "width": "document.documentElement.scrollWidth",
        },
    )
    assert visit.console == [] and visit.requests == []
    assert visit.values["areas"] >= 4  # parameters, gradients, optimizer state, activations
    peak = cli_run["report"]["devices"][0]["peak_allocated_bytes"]
    assert int(visit.values["peak_bytes"]) == peak
    assert visit.values["peak_text"] == f"peak {format_bytes(peak)}"
    assert "allocated" in visit.values["hover"] and "parameters" in visit.values["hover"]
    assert visit.values["width"] <= 1280  # no sideways scrolling at 1280×800
    assert visit.screenshot.startswith(b"\x89PNG") and len(visit.screenshot) > 20_000
    assert visit.load_seconds < 1.0
    (cli_run["tmp"] / "screenshot.png").write_bytes(visit.screenshot)


def test_bad_output_paths_fail_before_the_script_runs(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("open('ran', 'w').close()\n")
    r = run_torchplace("sim", "--html", "missing/r.html", "train.py", cwd=tmp_path)
    assert r.returncode == 2
    assert "--html missing/r.html: the folder" in r.stderr and "mkdir -p" in r.stderr
    r = run_torchplace("sim", "--snapshot", ".", "train.py", cwd=tmp_path)
    assert r.returncode == 2 and "that is a folder" in r.stderr
    r = run_torchplace("sim", "--html", "r.html", "--find-max", "B", "train.py", cwd=tmp_path)
    assert r.returncode == 2 and "--html is not available with --find-max" in r.stderr
    assert not (tmp_path / "ran").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_an_oom_still_writes_the_page_with_the_failure_point(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\nkeep = torch.empty(1024, device='cuda')\n\n"
        "more = torch.empty(100 * 1024**3, dtype=torch.uint8, device='cuda')\n"
    )
    r = run_torchplace(
        "sim", "--html", "r.html", "--json", "--values", "placeholder", "train.py", cwd=tmp_path
    )
    assert r.returncode == 1
    report = json.loads(r.stdout)
    page = (tmp_path / "r.html").read_text()
    assert report["oom"]["line"] == 4
    assert "out of memory: 100.00 GiB more at train.py:4" in page
    assert report["timelines"][0]["ooms"][0]["line"] == 4
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_ranks_get_a_section_each() -> None:
    from torchplace.sim.planning import _rank_row

    with simulate("H100", gpus=2, values="placeholder") as report:
        x = [torch.empty((r + 1) * 1024**2, device=f"cuda:{r}") for r in (0, 1)]
    del x
    report.add_timelines()
    rows = [_rank_row(r, r, report) for r in (0, 1)]  # as torchplace sim --nproc-per-node
    report.ranks = [{"nproc_per_node": 2, "nnodes": 1, "world": 2, "ranks": rows}]
    page = render_html(report)
    assert "rank 0 of 2 (cuda:0" in page and "rank 1 of 2 (cuda:1" in page
    assert page.count("<svg class='chart'") == 2
    assert "data-peak-bytes='4194304'" in page and "data-peak-bytes='8388608'" in page


def test_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from torchplace.sim.timeline import plot

    report = _train(steps=1)
    report.add_timelines()
    plot(report, tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes().startswith(b"\x89PNG")
