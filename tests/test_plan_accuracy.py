"""A simulated DDP / FSDP2 rank's peak against a real 2-process gloo run on the CPU (2 %).

A small case of ``benchmarks/plan_accuracy.py`` (one training step, so that gloo's late
frees on rank 0, which that benchmark explains, do not reach the peak), which explains what
is compared. The FSDP2 case is the regression test for FSDP2's ``to_empty`` under the
measuring profiler.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch.distributed as dist

_BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "plan_accuracy.py"


@pytest.fixture(scope="module")
def plan_accuracy() -> ModuleType:
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available in this build")
    # spawned ranks import the benchmark by name: it must be importable, not just loaded
    sys.path.insert(0, str(_BENCHMARK.parent))
    module = importlib.import_module("plan_accuracy")
    return module


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_rank_peak_matches_a_real_gloo_run(plan_accuracy: ModuleType, strategy: str) -> None:
    # The simulated side is deterministic; the measured one is not: on a busy machine gloo's
    # worker threads can free a collective's tensors after the step moved on, raising the
    # real peak (benchmarks/plan_accuracy.py). Up to three real runs, one must agree.
    attempts = []
    for _ in range(3):
        try:
            rows = plan_accuracy.compare("tiny", strategy, 2, steps=1)
        except Exception as e:  # gloo could not start here (no loopback, sandbox)
            if "gloo" in str(e).lower() or "connect" in str(e).lower():
                pytest.skip(f"a 2-process gloo run failed to start: {e}")
            raise
        assert [r["rank"] for r in rows] == [0, 1]
        assert all(r["measured"] > 1024**2 for r in rows)  # a real measurement
        attempts.append([(r["rank"], r["measured"], r["simulated"], r["diff"]) for r in rows])
        if all(abs(r["diff"]) <= plan_accuracy.TOLERANCE for r in rows):
            return
    raise AssertionError(f"no real run within {plan_accuracy.TOLERANCE:.0%}: {attempts}")
