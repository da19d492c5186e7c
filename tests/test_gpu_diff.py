"""benchmarks/gpu_diff.py, tested on a CPU: the comparison, the JSON, the skips, both halves.

The real GPU is one seam (``run.machine``, patched); a "python" that is ``torchplace sim``
stands in for the GPU's interpreter, so both halves run end to end here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_diff  # noqa: E402

conformance = gpu_diff.conformance
H100 = conformance.Machine(("NVIDIA H100 80GB HBM3",), ((9, 0),))


def _point(at: str, **devices: tuple[int, int, int]) -> dict[str, Any]:
    return {
        "at": at,
        "devices": {d[-1]: dict(zip(gpu_diff.METRICS, v, strict=True)) for d, v in devices.items()},
    }


def _half(exit_code: int = 0, **record: Any) -> dict[str, Any]:
    base = {"steps": [_point("end", d0=(512, 512, 2 << 20))], "error": None, "stdout": ""}
    return {"exit": exit_code, "seconds": 1.0, "record": {**base, **record}}


def test_exceptions_compare_by_type_text_and_line() -> None:
    err = {"type": "RuntimeError", "message": "boom", "line": 3}
    assert gpu_diff.compare_errors(err, dict(err)) == []
    assert gpu_diff.compare_errors(err, {**err, "line": 4, "message": "bang"}) == [
        "exception message: GPU 'boom', simulated 'bang'",
        "exception line: GPU 3, simulated 4",
    ]
    assert gpu_diff.compare_errors(None, err) == [
        "exception: GPU none, simulated RuntimeError at line 3"
    ]


def test_outputs_compare_text_and_measure_the_numbers() -> None:
    same = gpu_diff.compare_output("loss 2.5000 step 3\n", "loss 2.5100 step 3\n")
    assert same["same_text"] and same["max_relative_difference"] == pytest.approx(0.01 / 2.51)
    assert not gpu_diff.compare_output("loss 2.5\n", "loss: 2.5\n")["same_text"]
    assert not gpu_diff.compare_output("1 2\n", "1 2 3\n")["same_text"]


def test_memory_compares_every_point_device_and_metric() -> None:
    real = [_point("step 1", d0=(1000, 1500, 2 << 20)), _point("end", d0=(0, 1500, 2 << 20))]
    assert gpu_diff.compare_memory(real, real)["verdict"] == "same"
    close = [_point("step 1", d0=(1020, 1500, 2 << 20)), real[1]]
    result = gpu_diff.compare_memory(real, close)
    assert result["verdict"] == "close" and (result["equal"], result["points"]) == (5, 6)
    assert result["worst"] == {
        "at": "step 1", "device": 0, "metric": "allocated", "gpu": 1000, "simulated": 1020,
        "relative": 0.02,
    }  # fmt: skip
    far = [_point("step 1", d0=(1000, 1500, 2 << 20), d1=(0, 0, 2 << 20)), real[1]]
    assert gpu_diff.compare_memory(real, far)["worst"]["device"] == 1  # a device only one used
    assert gpu_diff.compare_memory(real, real[:1])["problems"] == [
        "2 points on the GPU, 1 simulated"
    ]


def test_an_item_is_same_close_or_differs_and_says_why() -> None:
    assert gpu_diff.compare(_half(), _half())["verdict"] == "same"
    err = {"type": "ValueError", "message": "x", "line": 2}
    differs = gpu_diff.compare(_half(1, error=err), _half(0))
    assert differs["verdict"] == "differs"
    assert differs["differences"] == [
        "exit: GPU 1, simulated 0",
        "exception: GPU ValueError at line 2, simulated none",
    ]
    more = _half(steps=[_point("end", d0=(1024, 1024, 2 << 20))])
    assert gpu_diff.compare(_half(), more)["differences"] == [
        "memory: allocated of cuda:0 at end: GPU 512 B, simulated 1,024 B"
    ]
    missing = {"type": "ModuleNotFoundError", "message": "No module named 'x'", "line": 1}
    assert gpu_diff.compare(_half(1, error=missing), _half()) == {
        "verdict": "skipped",
        "reason": "the GPU's Python: No module named 'x'",
    }
    lost = gpu_diff.compare({"exit": -9, "record": None}, _half())
    assert lost == {"verdict": "no record", "differences": ["no record from the GPU run"]}


def test_the_json_and_the_table() -> None:
    result = {
        "mode": "gpu",
        "machine": {"gpus": ["NVIDIA H200"], "torch": "2.11.0+cu130", "cuda": "13.0"},
        "simulated_gpu": "h200-sxm-141gb",
        "seconds": 12.0,
        "summary": {"same": 1, "skipped": 1},
        "items": [
            {"name": "a_case", "verdict": "same", "real": _half(), "sim": _half(),
             **gpu_diff.compare(_half(), _half())},
            {"name": "two_gpus", "verdict": "skipped", "reason": "needs 2 GPUs; this machine has 1"},
        ],
    }  # fmt: skip
    assert gpu_diff.default_out(result) == (
        gpu_diff.RESULTS / "gpu_diff-h200-sxm-141gb-torch2.11.0.json"
    )
    text = gpu_diff.table(result)
    assert "a_case" in text and "3/3 equal" in text and "needs 2 GPUs" in text
    assert text.splitlines()[-1].startswith("2 items on NVIDIA H200 (torch 2.11.0+cu130")
    sim_only = {**result, "mode": "sim-only"}
    assert gpu_diff.default_out(sim_only).parent != gpu_diff.RESULTS  # never committed


@pytest.fixture
def sim_python(tmp_path: Path) -> str:
    path = tmp_path / "python"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m torchplace sim --values real "$@"\n')
    path.chmod(0o755)
    return str(path)


def test_both_halves_end_to_end_with_the_gpu_as_one_seam(
    tmp_path: Path, sim_python: str, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setattr(conformance, "machine", lambda python: H100)
    monkeypatch.setattr(gpu_diff, "_versions", lambda python: {"torch": "2.13.0", "cuda": None})
    out = tmp_path / "diff.json"
    argv = ["--python", sim_python, "--quick", "-k", "mismatch_conv", "--jobs", "2"]
    code = gpu_diff.main([*argv, "--out", str(out)])
    result = json.loads(out.read_text())
    assert code == 0, capsys.readouterr().out
    assert result["simulated_gpu"] == "h100-sxm-80gb" and result["mode"] == "gpu"
    assert [r["name"] for r in result["items"]] == ["mismatch_conv", "mismatch_conv_batch"]
    for row in result["items"]:
        assert row["verdict"] == "same", row["differences"]
        assert row["real"]["record"]["error"]["type"] == "RuntimeError"
        assert row["memory"]["points"] == 3  # one device, at the end
    assert "written to" in capsys.readouterr().out


def test_the_simulated_half_alone_and_the_skips(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    argv = ["--sim-only", "--gpu", "H200", "--quick", "-k", "api_nvtx", "--out", str(out)]
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_diff.py"), *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(out.read_text())
    assert result["mode"] == "sim-only" and result["simulated_gpu"] == "h200-sxm-141gb"
    (row,) = result["items"]
    assert row["verdict"] == "sim only" and row["real"] is None
    assert row["sim"]["record"]["error"] is None and row["sim"]["exit"] == 0
    assert "api_nvtx  sim only  not run" in r.stdout
    # what a one-H200 machine skips, without running anything
    on = conformance.Machine(("NVIDIA H200",), ((9, 0),))
    skips = {c.name: conformance.skip_reason(c, on) for c in gpu_diff.items()}
    assert skips["ddp_torchrun"] == "needs 2 GPUs; this machine has 1"
    assert skips["nanogpt_issue88"] == "written for V100-SXM2-16GB; this machine has NVIDIA H200"
    assert skips["mnist"] is None


def test_timing_calls_the_profiler_or_says_it_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpu_diff, "PROFILER", tmp_path / "timing" / "profile_gpu.py")
    with pytest.raises(SystemExit, match=r"--timing runs .*profile_gpu\.py, which this checkout"):
        gpu_diff.profiler()
    gpu_diff.PROFILER.parent.mkdir()
    gpu_diff.PROFILER.write_text(
        "from pathlib import Path\n"
        "def run(out_dir: Path, quick: bool) -> Path:\n"
        "    return out_dir / f'timing-{quick}.json'\n"
    )
    assert gpu_diff.profiler()(tmp_path, True) == tmp_path / "timing-True.json"
