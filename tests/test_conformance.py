"""The CUDA conformance cases (tests/conformance/cases), each under ``torchplace sim``.

Each case states what a real GPU does, with its source; see tests/conformance/run.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "conformance"))
import run as conformance

_CASES = [(case, mode) for case in conformance.cases() for mode in case.modes]


@pytest.mark.parametrize(
    ("case", "mode"), _CASES, ids=[f"{case.name}[{mode}]" for case, mode in _CASES]
)
def test_case(case: conformance.Case, mode: str) -> None:
    code, report, stderr = conformance.simulate(case, mode)
    problems = conformance.check(case, code, report)
    assert not problems, "\n".join(problems) + "\n--- stderr ---\n" + stderr[-3000:]
