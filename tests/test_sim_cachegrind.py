"""``benchmarks/sim_cachegrind.py``: its reading of cachegrind's summary, and its errors.
(A measurement runs valgrind for tens of minutes: not in the test suite.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

# The end of a real cachegrind run's stderr (valgrind 3.19: import torch, two simulated steps).
_SUMMARY = """\
==31889== I   refs:      12,437,195,134
==31889== I1  misses:       149,588,066
==31889== LLi misses:           189,211
==31889== I1  miss rate:           1.20%
==31889== LLi miss rate:           0.00%
==31889== D   refs:       5,324,249,424  (3,747,244,987 rd   + 1,577,004,437 wr)
==31889== D1  misses:       181,379,415  (  157,643,800 rd   +    23,735,615 wr)
==31889== LLd misses:         5,701,836  (    1,510,843 rd   +     4,190,993 wr)
==31889== D1  miss rate:            3.4% (          4.2%     +           1.5%  )
==31889== LLd miss rate:            0.1% (          0.0%     +           0.3%  )
==31889== LL refs:          330,967,481  (  307,231,866 rd   +    23,735,615 wr)
==31889== LL misses:          5,891,047  (    1,700,054 rd   +     4,190,993 wr)
==31889== LL miss rate:             0.0% (          0.0%     +           0.3%  )
"""


def test_the_summary_is_read_as_totals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(_BENCHMARKS))
    from sim_cachegrind import parse_summary

    assert parse_summary(_SUMMARY) == {
        "instructions": 12_437_195_134, "I1 misses": 149_588_066, "D1 misses": 181_379_415,
        "LL misses": 5_891_047,
    }  # fmt: skip
    with pytest.raises(RuntimeError, match="no LL misses in cachegrind's output"):
        parse_summary(_SUMMARY.replace("LL misses", "LL m"))


def _run(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = None if path is None else {"PATH": path}
    script = str(_BENCHMARKS / "sim_cachegrind.py")
    return subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_without_valgrind_it_says_how_to_get_it(tmp_path: Path) -> None:
    done = _run("--steps", "1", path=str(tmp_path))
    assert done.returncode == 2
    assert "valgrind is not installed" in done.stderr


def test_an_unknown_model_is_refused_with_the_choices() -> None:
    done = _run("--models", "resnet")
    assert done.returncode == 2
    assert "unknown model resnet; choose from cnn, transformer" in done.stderr
