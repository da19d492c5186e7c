"""Real programs (tests/programs): each runs under ``torchplace sim`` as a user would run it.

Every program follows a public program's pattern (its docstring names which) and ends with
the checks a GPU run satisfies; its ``EXPECT`` literal says how to run it and what the report
must say, read as the conformance cases' (tests/conformance/run.py). Beyond that, a run that
exits 0 must have used the simulated GPU: a peak above zero and host-to-device copies
counted. ``EXPECT["heavy"]`` programs are deselected by default (``-m heavy`` runs them;
benchmarks/programs.py runs all);
``EXPECT["xfail"]`` names a known simulator limitation.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "conformance"))
import run as conformance

PROGRAMS = Path(__file__).parent / "programs"


def programs() -> list[conformance.Case]:
    """The corpus: every tests/programs/*.py but the modules they import (``_*.py``)."""
    return [
        conformance.load(p, source=False)
        for p in sorted(PROGRAMS.glob("*.py"))
        if not p.name.startswith("_")
    ]


def sanity(report: dict[str, Any]) -> list[str]:
    """A run that exits 0 used the GPU: peak allocated > 0 and host-to-device copies, in the
    report or in those of the processes it started (mp.spawn)."""
    reports = [report] + [p["report"] for p in report.get("processes", []) if p.get("report")]
    peak = max(d["peak_allocated_bytes"] for r in reports for d in r.get("devices", [{}]))
    h2d = sum(r["transfers"]["h2d"]["count"] for r in reports if "transfers" in r)
    problems = [] if peak > 0 else ["peak allocated is 0: the GPU was never used"]
    return problems + ([] if h2d > 0 else ["no host-to-device copy counted"])


def problems(case: conformance.Case) -> tuple[list[str], str]:
    """What differs from the program's EXPECT, and the run's stderr, in its first value mode."""
    code, report, stderr = conformance.simulate(case, case.modes[0])
    found = conformance.check(case, code, report)
    if report and code == 0 and not found:
        found = sanity(report)
    return found, stderr


def _param(case: conformance.Case) -> Any:
    marks = [pytest.mark.heavy] if case.expect.get("heavy") else []
    if "xfail" in case.expect:
        marks.append(pytest.mark.xfail(reason=case.expect["xfail"], strict=True))
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in programs()])
def test_program(case: conformance.Case) -> None:
    found, stderr = problems(case)
    assert not found, "\n".join(found) + "\n--- stderr ---\n" + stderr[-3000:]
