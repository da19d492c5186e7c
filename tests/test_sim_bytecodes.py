"""``benchmarks/sim_bytecodes.py``: it runs, and its counts are consistent (the simulator's
share is part of the simulated step's, which exceeds the plain step's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "sim_bytecodes.py"


def _numbers(line: str) -> list[int]:
    return [int(cell.replace(",", "")) for cell in line.split()[1:]]


def test_the_benchmark_counts_bytecodes_and_calls_per_step() -> None:
    done = subprocess.run(
        [sys.executable, str(_SCRIPT), "--models", "cnn", "--steps", "1", "--top", "3"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rows = [line for line in lines if line.startswith("cnn ")]
    assert len(rows) == 2, done.stdout
    plain, simulated, ours, torch_share = _numbers(rows[0])
    assert 0 < plain < simulated and 0 < ours < simulated and ours + torch_share <= simulated
    py_plain, c_plain, py_sim, c_sim, py_ours, c_ours = _numbers(rows[1])
    assert 0 < py_plain < py_sim and 0 < c_plain < c_sim
    assert 0 < py_ours < py_sim and 0 < c_ours < c_sim
    assert "the 3 functions that execute the most bytecodes per step" in done.stdout
