"""``torchplace sim`` end to end, through ``python -m torchplace`` in a subprocess."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers import run_torchplace


def sim(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_torchplace("sim", *args, cwd=cwd)


def test_builtin_example_json_schema() -> None:
    r = sim("--json", "--gpu", "a100-80gb")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)  # the script's own prints went to stderr
    assert "Using cuda (NVIDIA A100-SXM4-80GB)" in r.stderr
    assert report["schema_version"] == 1
    assert report["gpu"]["key"] == "a100-sxm-80gb"
    (dev,) = report["devices"]
    assert {
        "index",
        "name",
        "capacity_bytes",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
    } <= set(dev)
    assert dev["peak_reserved_bytes"] >= dev["peak_allocated_bytes"] > 0
    assert dev["estimated_step_seconds"] > 0
    assert report["oom"] is None and report["error"] is None and report["exit_code"] == 0
    assert set(report["transfers"]) == {"h2d", "d2h", "d2d"}
    assert report["transfers"]["h2d"]["count"] > 0
    sync = next(s for s in report["syncs"] if s["kind"] == "item")
    assert sync["file"].endswith("example.py") and sync["count"] == 8


def test_device_bug_is_reported_with_file_and_line() -> None:
    r = sim("--json", "-m", "torchplace.sim.example", "--forget-labels", "--steps", "2")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    err = report["error"]
    assert err["type"] == "RuntimeError"
    assert "Expected all tensors to be on the same device" in err["message"]
    assert err["file"].endswith("example.py") and err["line"] > 0
    assert "Traceback" in r.stderr and "torchplace/sim/_modes.py" not in r.stderr


def test_script_exit_code_args_and_oom_handling(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, torch\n"
        "assert sys.argv[1:] == ['--flag', 'x']\n"
        "try:\n"
        "    torch.empty(30 * 1024**3, dtype=torch.uint8, device='cuda')\n"
        "except torch.OutOfMemoryError as e:\n"
        "    print('caught', str(e).splitlines()[0][:40])\n"
        "    sys.exit(3)\n"
    )
    r = sim("--json", "--gpu", "T4", str(script), "--flag", "x")
    assert r.returncode == 3, r.stderr
    report = json.loads(r.stdout)
    assert report["exit_code"] == 3
    assert report["oom"]["device"] == 0 and report["oom"]["line"] == 4
    assert report["oom"]["requested_bytes"] >= 30 * 1024**3
    assert "caught CUDA out of memory. Tried to allocate" in r.stderr


def test_parent_survives_an_aborting_child(tmp_path: Path) -> None:
    script = tmp_path / "abort.py"
    script.write_text("import os\nos.abort()\n")
    r = sim(str(script))
    assert r.returncode != 0
    assert "died (SIGABRT)" in r.stdout


def test_table_output_and_list_gpus() -> None:
    r = sim("--gpus", "2", "--memory", "22.5GiB", "-m", "torchplace.sim.example", "--steps", "1")
    assert r.returncode == 0, r.stderr
    assert "2 × simulated" in r.stdout and "cuda:1" in r.stdout and "22.50 GiB" in r.stdout
    listed = sim("--list-gpus")
    assert (
        listed.returncode == 0 and "h100-sxm-80gb" in listed.stdout and "Tesla T4" in listed.stdout
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "H1000"], "H100"),
        (["--gpus", "0"], "--gpus must be at least 1"),
        (["--memory", "lots"], "lots"),
        (["no_such_script.py"], "no such script"),
    ],
)
def test_bad_input(args: list[str], message: str) -> None:
    r = sim(*args)
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and message in r.stderr
    assert "Traceback" not in r.stderr


def test_torch_compile_warns_and_runs_eagerly(tmp_path: Path) -> None:
    script = tmp_path / "compiled.py"
    script.write_text(
        "import torch\n"
        "m = torch.compile(torch.nn.Linear(4, 4).cuda())\n"
        "m(torch.ones(2, 4, device='cuda'))\n"
    )
    r = sim(str(script))
    assert r.returncode == 0, r.stderr
    assert "torch.compile is not simulated" in r.stderr
