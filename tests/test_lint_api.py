"""The library API the simulator and scripts use, and what importing it costs."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from torchplace import lint
from torchplace.lint import RULES, SIM_EVENT_RULES, lint_file, rules_for_sim_event

MODULES = [
    "torchplace.lint",
    "torchplace.lint.rules",
    "torchplace.lint.finding",
    "torchplace.lint.engine",
    "torchplace.lint.fixes",
    "torchplace.lint.output",
    "torchplace.lint.checks",
    "torchplace.lint._context",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    failed, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failed == 0


@pytest.mark.parametrize("name", MODULES)
def test_every_module_has_all(name: str) -> None:
    module = importlib.import_module(name)
    for public in module.__all__:
        assert hasattr(module, public), (name, public)


def test_lint_does_not_import_torch(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("import torch\nm = torch.load('ckpt.pt')\n")
    code = (
        "import sys\nfrom torchplace.lint import lint_file\n"
        f"print(len(lint_file({str(script)!r})), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "False"]


def test_sim_event_kinds_map_to_existing_rules() -> None:
    sim_kinds = {"item", "tolist", "bool", "print", "to cpu", "copy_ to host", "synchronize"}
    assert sim_kinds <= set(SIM_EVENT_RULES)
    for kind, codes in SIM_EVENT_RULES.items():
        assert rules_for_sim_event(kind) == codes
        for code in codes:
            assert kind in RULES[code].sim_events, (kind, code)
    for rule in RULES.values():
        for kind in rule.sim_events:
            assert rule.code in rules_for_sim_event(kind)
    assert rules_for_sim_event("no such event") == ()


def test_finding_fields_for_the_simulator(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nmodel = torch.nn.Linear(2, 1).to('cuda')\n"
        "for x in data:\n    loss = model(x).sum()\n    loss.backward()\n    v = loss.item()\n"
    )
    (finding,) = lint_file(script, select=["TPL101"])
    assert (finding.path, finding.line, finding.col, finding.code) == (str(script), 6, 9, "TPL101")
    assert finding.end_line == 6 and finding.end_col > finding.col
    assert "every step" in finding.message and finding.hint
    assert finding.code in rules_for_sim_event("item")
    assert finding.to_dict()["fixable"] is False


def test_lint_paths_counts_and_progress(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"m{i}.py").write_text("import torch\ntorch.load('ckpt.pt')\n")
    seen: list[tuple[int, int]] = []
    result = lint.lint_paths([tmp_path], progress=lambda done, total, _: seen.append((done, total)))
    assert (result.files, result.lines, len(result.findings)) == (3, 6, 3)
    assert seen == [(1, 3), (2, 3), (3, 3)]
    with pytest.raises(lint.LintPathError, match="no such file or folder"):
        lint.lint_paths([tmp_path / "nope"])


def test_encodings_and_undecodable_files(tmp_path: Path) -> None:
    latin = tmp_path / "latin.py"
    latin.write_bytes(
        b"# -*- coding: latin-1 -*-\nimport torch\ns = '\xe9'; torch.load('ckpt.pt')\n"
    )
    assert [(f.line, f.col) for f in lint_file(latin, select=["TPL301"])] == [(3, 10)]
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"x = '\xff\xfe'\n")
    (finding,) = lint_file(bad)
    assert finding.code == "TPL001"
