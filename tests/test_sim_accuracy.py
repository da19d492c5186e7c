"""The simulator's peak memory against the profiler's, for one real CPU training step.

A small version of ``benchmarks/sim_accuracy.py`` (which explains what is compared):
the same transformer step runs on the CPU under ``torch.profiler`` and under
``simulate("H100")``; their peak tensor bytes must agree within 2 %.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

_BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "sim_accuracy.py"


@pytest.fixture(scope="module")
def sim_accuracy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sim_accuracy", _BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_simulated_peak_matches_the_profiler_within_2_percent(sim_accuracy: ModuleType) -> None:
    case = sim_accuracy.transformer_case(batch=2, context=64, dim=64, layers=1, vocab=512)
    result = sim_accuracy.measure(case)
    assert result.profiler_peak > 1024**2  # a real measurement, not an empty timeline
    assert abs(result.difference) <= sim_accuracy.TOLERANCE, result
    # What the GPU reports is whole allocator blocks: never less than the tensors hold.
    assert result.allocated_peak >= result.simulator_peak


def test_activation_checkpointing_peak_matches_the_profiler(sim_accuracy: ModuleType) -> None:
    # the recompute in backward must take the path forward took (issue 8: CheckpointError)
    case = sim_accuracy.transformer_case(
        batch=2, context=64, dim=64, layers=2, vocab=512, checkpointed=True
    )
    result = sim_accuracy.measure(case)
    assert abs(result.difference) <= sim_accuracy.TOLERANCE, result
