"""``--values auto``'s scout (torchplace.sim._values): what counts as a side effect.

The scout runs the script with placeholder values until it knows whether real values fit,
and must stop before the script changes anything outside its process (so that the run
after it does that once). End to end: tests/test_cli_sim.py (test_auto_runs_the_script_once).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchplace.sim import _values


@pytest.mark.parametrize(
    ("args", "writes"),
    [
        (("a.txt", "r", 0), False),
        (("a.txt", "rb", 0), False),
        (("a.txt", "w", 0), True),
        (("a.txt", "ab", 0), True),
        (("a.txt", "x", 0), True),
        (("a.txt", "r+", 0), True),
        (("a.txt", None, os.O_RDONLY), False),
        (("a.txt", None, os.O_WRONLY | os.O_CREAT), True),
        (("a.txt", None, os.O_RDWR), True),
    ],
)
def test_an_open_is_a_side_effect_when_it_may_write(args: tuple[object, ...], writes: bool) -> None:
    assert _values._writes(args) is writes


def test_caches_pseudo_files_and_the_simulators_scratch_are_not_side_effects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for path in (
        tmp_path / "cache" / "huggingface" / "token",
        tmp_path / "pkg" / "__pycache__" / "m.cpython-311.pyc",
        "/dev/null",
        "/proc/self/oom_score_adj",
        tmp_path / "torchplace-sim-files-x1" / "ckpt.pt",
        1,
    ):
        assert _values._exempt(path), path
    for path in (tmp_path / "out.txt", tmp_path / "cache.txt", Path.home() / "x.pt", 5):
        assert not _values._exempt(path), path


def test_mkdir_of_a_folder_that_exists_changes_nothing(tmp_path: Path) -> None:
    assert _values._harmless("os.mkdir", (str(tmp_path),))
    assert not _values._harmless("os.mkdir", (str(tmp_path / "new"),))
    assert not _values._harmless("os.remove", (str(tmp_path / "a.txt"),))
    assert not _values._harmless("subprocess.Popen", ("ls",))


def test_a_piped_input_has_no_scout() -> None:
    """The scout shares standard input with the run after it: data on a pipe would be
    consumed by the scout, so auto then decides in the run, in place."""
    code = "from torchplace.sim import _values; print(_values._stdin_is_safe())"
    piped = subprocess.run(
        [sys.executable, "-c", code], input="data", capture_output=True, text=True, check=True
    )
    assert piped.stdout.strip() == "False"
    closed = subprocess.run(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert closed.stdout.strip() == "True"


def test_a_placeholder_run_says_what_real_values_would_take() -> None:
    """Every report gives the host memory real values take (or would): what a caller that
    decides between runs passes to _values.choose (the ranks of a world decide together)."""
    import torch

    from torchplace.sim import simulate

    with simulate("H100", values="placeholder") as placeholder:
        w = torch.ones(1024, 1024, device="cuda")  # 4 MiB
        del w
        torch.ones(256, 1024, device="cuda")  # 1 MiB
    with simulate("H100", values="real") as real:
        w = torch.ones(1024, 1024, device="cuda")
        del w
        torch.ones(256, 1024, device="cuda")
    assert placeholder.values_decision is not None and real.values_decision is not None
    peak = placeholder.values_decision["real_peak_bytes"]
    assert peak == real.values_decision["real_peak_bytes"] == 4 * 2**20
    assert _values.choose("auto", peak, 4 * 2**20) == "real"
    assert _values.choose("auto", peak, 4 * 2**20 - 1) == "placeholder"


@pytest.mark.parametrize(
    ("action", "event"),
    [
        ("open(sys.argv[2], 'w').write('x')", "(open)"),
        ("os.makedirs(sys.argv[2])", "(os.mkdir)"),
        ("subprocess.run(['touch', sys.argv[2]])", "(subprocess.Popen)"),
        ("multiprocessing.get_context('spawn').Process(target=print).start()",
         "(multiprocessing)"),
        ("input()", "(builtins.input)"),
    ],
)  # fmt: skip
def test_the_scout_stops_before_the_side_effect(tmp_path: Path, action: str, event: str) -> None:
    """A scout (on a stand-in for the simulation's state) ends at the side effect, which
    does not happen, and leaves its decision for the run after it."""
    decision, target = tmp_path / "decision.json", tmp_path / "made"
    code = textwrap.dedent(f"""
        import multiprocessing, os, subprocess, sys
        from torchplace.sim import _values

        class State:  # what the scout reads of the simulation's state
            host_limit, host_peak, counts_host, scout = None, 0, False, None

        scout = _values.Scout(sys.argv[1], None)
        scout.watch(State())
        print("held back")
        {action}
        print("not reached")
        """)
    done = subprocess.run(
        [sys.executable, "-c", code, str(decision), str(target)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert not target.exists()
    found = json.loads(decision.read_text())
    assert found["values"] == "real" and found["event"].endswith(event)
