"""``torchplace bench`` through ``python -m torchplace`` in a subprocess."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers import run_torchplace


def _bench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_torchplace("bench", *args, cwd=cwd)


def test_quick_json_with_a_projected_gpu() -> None:
    # one size per sweep and short timings keep this a few seconds
    proc = _bench(
        "--quick", "--json", "--sizes", "1", "--max-run-time", "0.02", "--gpu", "H100", "--op",
        "elementwise,matmul",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema_version"] == 1 and doc["quick"] is True
    cpu = [r for r in doc["rows"] if r["device"] == "cpu"]
    h100 = [r for r in doc["rows"] if r["device"] == "h100-sxm-80gb"]
    measured = {(r["op"], r["dtype"]) for r in cpu}
    assert {("elementwise", "fp32"), ("matmul", "fp32")} <= measured
    # reduced precision is swept where the CPU has a native kernel; otherwise a note says why
    for dtype in ("bf16", "fp16"):
        skipped = any(f"skipped {dtype} matmul on cpu" in n for n in doc["notes"])
        assert (("matmul", dtype) in measured) != skipped
    assert all(r["projected"] is False and r["seconds"] > 0 and r["runs"] >= 5 for r in cpu)
    assert h100 and all(r["projected"] is True for r in h100)
    assert {r["op"] for r in h100} == {"elementwise", "matmul", "copy_h2d", "copy_d2h"}
    cpu_peaks = next(p for p in doc["peaks"] if p["device"] == "cpu")
    assert cpu_peaks["measured"] is True and "measured" in cpu_peaks["source"]
    assert proc.stderr == ""  # no progress bar with --json


def test_unknown_gpu_is_an_error_with_the_catalogs_suggestion() -> None:
    proc = _bench("--gpu", "H900", "--sizes", "1")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: Unknown GPU 'H900'. Did you mean 'h200-sxm-141gb'?")
    assert "Traceback" not in proc.stderr


def test_absent_device_is_an_error_with_a_hint() -> None:
    proc = _bench("--device", "cuda:3", "--sizes", "1")
    assert proc.returncode == 2
    assert "error: --device cuda:3: this machine has no such device" in proc.stderr
    assert "hint: " in proc.stderr and "--gpu NAME" in proc.stderr


def test_plot_without_matplotlib_says_how_to_install_it(tmp_path: Path) -> None:
    # a package named matplotlib that fails to import stands in for a machine without it
    hidden = tmp_path / "hide" / "matplotlib"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    env = {"PYTHONPATH": str(hidden.parent)}
    proc = run_torchplace("bench", "--plot", "out.png", "--quick", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert "error: plotting needs matplotlib" in proc.stderr
    assert "hint: pip install 'torchplace[plot]'" in proc.stderr
    assert not (tmp_path / "out.png").exists()
