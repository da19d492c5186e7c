"""benchmarks/unlisted_behaviours.py without simulating: which scripts --set picks, the format.

``run_one`` (the one call that starts ``torchplace sim``) is patched; the scripts themselves
are checked only for the format the runner relies on (a docstring, a cited expectation, a
valid ``# gpus:`` header).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import unlisted_behaviours as ub  # noqa: E402


def _fake_run(calls: list[tuple[str, str]]):
    def run_one(build, python, script, gpu, values, timeout):
        calls.append((script.parent.name, script.stem))
        passed = not script.stem.startswith("mem_")
        return ub.Result(build, script.parent.name, script.stem, 1, passed, 0.0, "")

    return run_one


@pytest.mark.parametrize(
    ("chosen", "folders"),
    [(None, {"unlisted"}), ("unlisted2", {"unlisted2"}), ("all", {"unlisted", "unlisted2"})],
)
def test_set_picks_the_folders(monkeypatch, tmp_path, chosen, folders):
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(ub, "run_one", _fake_run(calls))
    argv = ["--build", "cpu", "--cpu-python", sys.executable, "--json", str(tmp_path / "r.json")]
    if chosen:
        argv += ["--set", chosen]
    rc = ub.main(argv)
    assert {folder for folder, _ in calls} == folders
    wanted = sum(len(list(ub.SETS[f].glob("*.py"))) for f in folders)
    assert len(calls) == wanted
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["set"] == (chosen or "unlisted")
    assert data["summary"]["cpu"]["total"] == wanted
    assert rc == (1 if any(s.startswith("mem_") for _, s in calls) else 0)


def test_pattern_filters_within_the_set(monkeypatch):
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(ub, "run_one", _fake_run(calls))
    ub.main(["--build", "cpu", "--cpu-python", sys.executable, "--set", "unlisted2", "-k", "rng_"])
    assert calls and all(f == "unlisted2" and "rng_" in s for f, s in calls)


def test_unknown_set_is_refused(capsys):
    with pytest.raises(SystemExit):
        ub.main(["--set", "unlisted3"])
    assert "invalid choice: 'unlisted3'" in capsys.readouterr().err


@pytest.mark.parametrize("folder", sorted(ub.SETS))
def test_scripts_state_and_cite_their_behaviour(folder):
    scripts = sorted(ub.SETS[folder].glob("*.py"))
    assert scripts, folder
    for script in scripts:
        text = script.read_text()
        doc = ast.get_docstring(ast.parse(text))
        assert doc, f"{script.name}: no docstring stating the behaviour"
        assert "\n# " in text, f"{script.name}: no comment citing a source"
        assert ub.gpus_of(script) in (1, 2), script.name
