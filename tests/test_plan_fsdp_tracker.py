"""Rank 0's FSDP2 peak against torch's ``FSDPMemTracker`` (tiny model, 8 ranks, one step).

A small case of ``benchmarks/plan_fsdp_tracker.py``, which explains what is compared: the
simulator's requested bytes less the cuBLAS workspace should equal the tracker's total,
up to AdamW's 0-dim ``step`` counters (4 B per parameter; host tensors on CUDA).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "plan_fsdp_tracker.py"


def test_simulated_peak_matches_fsdp_mem_tracker() -> None:
    spec = importlib.util.spec_from_file_location("plan_fsdp_tracker", _BENCHMARK)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    tracker, simulated = bench.compare(["--model", "tiny", "--steps", "1"])
    params = 2 * 7 + 3  # tiny: 2 blocks of 7 parameters, embedding, norm and head
    assert tracker["peak"] > 0
    assert abs(simulated["requested"] - simulated["workspace"] - tracker["peak"]) <= 4 * params
