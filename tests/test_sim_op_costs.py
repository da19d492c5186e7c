"""``benchmarks/sim_op_costs.py``: it runs, and switching a part of the simulator off for a
measurement leaves the simulation's accounting as it was (its timings are not tested)."""

from __future__ import annotations

import functools
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
import torch

from torchplace.sim import simulate

_BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("cold", [False, True])
def test_the_benchmark_prints_a_row_per_operation(cold: bool) -> None:
    script = _BENCHMARKS / "sim_op_costs.py"
    done = subprocess.run(
        [sys.executable, str(script), "--number", "20", "--repeat", "1", *["--cold"] * cold],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert ("caches swept" in lines[0]) == cold
    assert lines[1].split()[:4] == ["operation", "plain", "modes", "sim"]
    rows = {line.split("  ")[0]: line.split()[-7:-1] for line in lines[2:]}  # µs per call
    assert set(rows) == {"view", "add (new tensor)", "add_ (in place)", "mm 64x64",
                         "host .item()", ".grad"}  # fmt: skip
    assert all(float(cell) > 0 for cells in rows.values() for cell in cells)


def _scenario(switched_off: Any) -> tuple[int, int, float]:
    """Memory after a tensor made before the switch and one made during it die while a part
    is switched off, after one more op, and the kernels priced."""
    with simulate("H100", values="real") as report:
        kept = torch.randn(1024, device="cuda")  # one 4 KiB block
        before = torch.randn(1024, device="cuda")
        with switched_off():
            during = torch.randn(4096, device="cuda") * 2
            del before, during
        allocated = torch.cuda.memory_allocated()
        after = kept * 2
        allocated_after = torch.cuda.memory_allocated()
        del after
    return allocated, allocated_after, report.devices[0].estimate["ops"]


def test_a_part_switched_off_is_switched_back_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(_BENCHMARKS))
    from sim_op_costs import without

    assert _scenario(nullcontext) == (4096, 8192, 5)  # randn, randn, randn, mul, mul
    for part in ("trace", "allocator"):
        assert _scenario(functools.partial(without, part)) == (4096, 8192, 5), part
    assert _scenario(functools.partial(without, "cost")) == (4096, 8192, 3)
