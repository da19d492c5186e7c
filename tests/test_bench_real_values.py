"""``benchmarks/bench_real_values.py`` runs end to end on a tiny budget and reports every
ratio it prints (its timings themselves are not tested: performance lives in benchmarks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_real_values.py"


def test_the_benchmark_reports_each_ratio() -> None:
    done = subprocess.run(
        [sys.executable, str(_SCRIPT), "--models", "cnn", "--steps", "1", "--warmup", "1",
         "--rounds", "1", "--interleaved", "2", "--threads", "1", "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["results"]["cnn"]
    for key in ("ratio_wall", "ratio_cpu", "modes_ratio_wall", "interleaved_ratio_wall",
                "interleaved_modes_ratio_wall", "interleaved_best_ratio_wall"):  # fmt: skip
        assert result[key] > 0, key
    assert result["ops_per_step"] > 0  # kernels per step, priced on the simulated GPU
