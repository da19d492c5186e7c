"""The timing benchmarks' data and tools: the published rows, GPU profiles, the scripts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.timing import calibration, profile_gpu  # noqa: E402


def test_published_rows_are_valid_and_split_before_fitting() -> None:
    rows = calibration.load_published()
    held = [r for r in rows if r.split == "holdout"]
    assert len(held) >= 20
    assert len({r.gpu for r in held}) >= 4
    assert {"resnet50-train", "bert-large-squad", "gpt2-train", "llama-decode"} <= {
        r.workload for r in held
    }
    assert {"fp32", "tf32"} & {r.precision for r in held}
    assert {"amp-fp16", "fp16-o2", "bf16"} & {r.precision for r in held}
    for r in rows:
        assert r.source and r.software and r.measured_seconds > 0


def test_published_loader_names_what_is_wrong(tmp_path: Path) -> None:
    text = calibration.PUBLISHED.read_text().splitlines()
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([text[0], text[1].replace(",holdout,", ",maybe,", 1)]))
    with pytest.raises(ValueError, match="split must be fit or holdout"):
        calibration.load_published(bad)
    bad.write_text("\n".join([text[0], text[1].replace("a100-sxm-80gb", "a100-xyz", 1)]))
    with pytest.raises(ValueError, match="Unknown GPU 'a100-xyz'"):
        calibration.load_published(bad)
    bad.write_text("id,split\nx,fit\n")
    with pytest.raises(ValueError, match="columns must be"):
        calibration.load_published(bad)


def _profile() -> dict:  # type: ignore[type-arg]
    return {
        "schema": calibration.PROFILE_SCHEMA,
        "device": {"name": "NVIDIA H100 80GB HBM3", "catalog_key": "h100-sxm-80gb"},
        "torch": "2.14.1",
        "cases": [
            {"id": "resnet50-train-amp-b64", "workload": "resnet50-train",
             "precision": "amp-fp16", "batch": 64, "options": {"channels_last": "1"},
             "step_seconds": 0.031,
             "kernels": [{"name": "sm90_xmma_fprop", "calls": 53, "cuda_seconds": 0.01}]},
        ],
    }  # fmt: skip


def test_profile_json_is_read_and_checked(tmp_path: Path) -> None:
    good = tmp_path / "timing-h100.json"
    good.write_text(json.dumps(_profile()))
    data = calibration.load_profile(good)
    assert data["cases"][0]["kernels"][0]["calls"] == 53
    wrong = _profile()
    wrong["schema"] = "something-else/1"
    good.write_text(json.dumps(wrong))
    with pytest.raises(ValueError, match="not a timing profile"):
        calibration.load_profile(good)
    wrong = _profile()
    del wrong["cases"][0]["step_seconds"]
    good.write_text(json.dumps(wrong))
    with pytest.raises(ValueError, match="lacks \\['step_seconds'\\]"):
        calibration.load_profile(good)
    good.write_text("{not json")
    with pytest.raises(ValueError, match="not a readable JSON profile"):
        calibration.load_profile(good)


def test_profile_gpu_refuses_plainly_without_cuda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        profile_gpu.run(tmp_path, quick=True)
    assert list(tmp_path.iterdir()) == []  # nothing written
    assert profile_gpu.main(["--out", str(tmp_path), "--quick"]) == 2


@pytest.mark.parametrize(
    "script",
    ["benchmarks/timing_accuracy.py", "benchmarks/timing/fit.py",
     "benchmarks/timing/measure_host.py", "benchmarks/timing/profile_gpu.py"],
)  # fmt: skip
def test_timing_scripts_have_help(script: str) -> None:
    out = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "usage:" in out.stdout


def test_nccl_rows_compare_bus_bandwidth() -> None:
    from benchmarks import timing_accuracy

    rows = timing_accuracy.nccl_rows()
    assert rows and all(abs(r["error"]) < 0.35 for r in rows)
