"""Planning a run: replay on other GPUs (torchplace.sim.plan) and the largest size that fits
(torchplace.sim.search, torchplace sim --gpu all / --find-max)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from helpers import run_torchplace
from torchplace import catalog
from torchplace.sim import plan, simulate
from torchplace.sim.search import FindMaxError, Probe, find_max, search

GiB = 1024**3

MLP = """import torch
model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 8)).cuda()
opt = torch.optim.AdamW(model.parameters())
for _ in range(2):
    model(torch.randn(512, 2048, device="cuda")).sum().backward()
    opt.step()
    opt.zero_grad()
big = torch.empty(15 * 1024**3, dtype=torch.uint8, device="cuda")
"""


def _run(spec: str) -> object:
    with simulate(spec, values="placeholder") as report:
        exec(compile(MLP, "mlp.py", "exec"), {})
    return report


@pytest.mark.parametrize("key", ["a100-sxm-40gb", "l4"])
def test_replay_equals_a_separate_run_where_the_kernels_agree(key: str) -> None:
    spec = catalog.lookup(key)
    h100 = _run("H100")
    (replayed,) = plan.replay_all(h100.state, [spec])
    alone = _run(key).device(0)
    assert replayed.fits
    assert replayed.peak_allocated_bytes == alone.peak_allocated_bytes
    assert replayed.peak_reserved_bytes == alone.peak_reserved_bytes
    assert replayed.estimated_step_seconds == pytest.approx(alone.estimated_step_seconds, rel=1e-9)


def test_replay_finds_the_out_of_memory_line_on_a_smaller_gpu() -> None:
    h100 = _run("H100")
    t4, big = plan.replay_all(h100.state, [catalog.lookup("T4"), catalog.lookup("H100")])
    assert big.fits and not t4.fits
    assert t4.oom is not None and t4.oom["file"] == "mlp.py" and t4.oom["line"] == 8
    assert t4.oom["requested_bytes"] == 15 * GiB


def test_gpu_list_on_the_command_line(tmp_path: Path) -> None:
    script = tmp_path / "mlp.py"
    script.write_text(MLP)
    r = run_torchplace(
        "sim", "--json", "--values", "placeholder", "--gpu", "T4,A100 80GB", str(script)
    )
    report = json.loads(r.stdout)
    rows = {g["key"]: g for g in report["plan"]["gpus"]}
    assert set(rows) == {"t4", "a100-sxm-80gb"}
    assert rows["a100-sxm-80gb"]["fits"] and not rows["t4"]["fits"]
    assert rows["t4"]["oom"]["line"] == 8
    assert len(report["plan"]["runs"]) == 1  # no attention: one run for both


def test_search_is_exact_on_memory_linear_in_the_size() -> None:
    limit = 1000 * 1024

    def probe(size: int) -> dict[str, Probe]:
        used = 4096 * size  # memory linear in the size
        return {"gpu": Probe(size, used > limit, used, used, limit)}

    (result,) = search(probe, margin=0.0).values()
    assert result.largest == 250  # 250 * 4096 = 1000 KiB exactly
    with_margin = search(probe, margin=0.05)["gpu"]
    assert with_margin.largest == 237  # 95% of the limit


def test_find_max_api_on_a_simulated_gpu() -> None:
    def step(batch: int) -> None:
        model = torch.nn.Linear(1024, 1024, device="cuda")
        model(torch.randn(batch, 1024, device="cuda")).sum().backward()

    result = find_max(step, gpu="T4", high=1 << 22)
    assert result.largest is not None and not result.capped
    fit, over = result.largest, result.largest + 1
    probes = {p.size: p for p in result.probes}
    assert probes[fit].fits(0.05) and not probes[over].fits(0.05)


def test_search_errors_name_the_problem() -> None:
    with pytest.raises(FindMaxError, match="does not reach the GPU"):
        search(lambda size: {"g": Probe(size, False, 10, 10, 100)})
    with pytest.raises(FindMaxError, match=r"failed at x\.py:3 with ValueError"):
        search(
            lambda size: {
                "g": Probe(
                    size,
                    False,
                    1,
                    1,
                    10,
                    error={"type": "ValueError", "message": "bad", "file": "x.py", "line": 3},
                )
            }
        )
    with pytest.raises(FindMaxError, match="1 <= low <= high"):
        search(lambda size: {}, low=0)


def test_find_max_command_line_errors(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import sys\n")
    r = run_torchplace("sim", "--find-max", "BATCH", str(script), "--batch-size", "64")
    assert r.returncode == 2 and "{BATCH} appears in no argument" in r.stderr
    r = run_torchplace("sim", "--find-max", "B", "--margin", "80%", str(script), "{B}")
    assert r.returncode == 2 and "--margin must be" in r.stderr
    r = run_torchplace("sim", "--gpu", "H100,H1000", str(script))
    assert r.returncode == 2 and "H1000" in r.stderr
