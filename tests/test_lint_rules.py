"""Every rule against fixtures that must fire and near misses that must not.

Each ``tests/lint_fixtures/tplNNN*.py`` marks the lines that must give a finding of rule
TPLNNN with ``# expect: TPLNNN``; every other line of the file must give none.
"""

from __future__ import annotations

import io
import tokenize
from collections import Counter
from pathlib import Path

import pytest

from torchplace.lint import RULES, lint_file, lint_source

FIXTURES = Path(__file__).parent / "lint_fixtures"
FILES = sorted(FIXTURES.glob("tpl*.py"))


def _expected(path: Path) -> Counter[tuple[int, str]]:
    expected: Counter[tuple[int, str]] = Counter()
    source = path.read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and "expect:" in tok.string:
            for code in tok.string.split("expect:", 1)[1].split():
                expected[(tok.start[0], code)] += 1
    return expected


def _code(path: Path) -> str:
    return path.stem[:6].upper()


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_fixture(path: Path) -> None:
    code = _code(path)
    found = Counter((f.line, f.code) for f in lint_file(path, select=[code]))
    assert found == _expected(path)


def test_every_rule_has_a_fixture_that_fires_and_near_misses() -> None:
    for code in RULES:
        if code == "TPL001":
            continue  # tested in test_lint_cli.py (files that do not parse)
        files = [p for p in FILES if _code(p) == code]
        assert files, f"no fixture for {code}"
        assert any(_expected(p) for p in files), f"no finding expected for {code}"
        assert any("near miss" in p.read_text() for p in files), f"no near miss for {code}"


def test_fixture_findings_all_have_a_message_and_a_hint() -> None:
    for path in FILES:
        for f in lint_file(path):
            assert f.message and "{" not in f.message, f
            assert f.hint, f


def test_columns_count_characters_not_bytes() -> None:
    src = 'import torch.nn as nn\nnote = "é"; m = nn.DataParallel(net)\n'
    (finding,) = lint_source(src, select=["TPL401"])
    assert (finding.line, finding.col) == (2, src.splitlines()[1].index("nn.") + 1)


def test_noqa_silences_the_named_rule_only() -> None:
    src = (
        "import torch\n"
        "a = torch.load('ckpt.pt')  # noqa: TPL301\n"
        "b = torch.load('ckpt.pt')  # noqa: TPL301, TPL302\n"
        "c = torch.load('ckpt.pt')  # noqa\n"
        "d = torch.load('ckpt.pt')  # noqa: E501\n"
    )
    found = [(f.line, f.code) for f in lint_source(src, select=["TPL301,TPL302"])]
    assert found == [(2, "TPL302"), (5, "TPL301"), (5, "TPL302")]


def test_select_and_ignore_by_prefix() -> None:
    src = "import torch\ntorch.load('ckpt.pt')\nimport torch.nn as nn\nnn.DataParallel(m)\n"
    assert {f.code for f in lint_source(src)} == {"TPL302"}  # TPL301, TPL401 are opt-in
    assert {f.code for f in lint_source(src, select=["ALL"])} == {"TPL301", "TPL302", "TPL401"}
    assert {f.code for f in lint_source(src, select=["TPL3"])} == {"TPL302"}  # a prefix: default
    assert {f.code for f in lint_source(src, select=["TPL3", "TPL301"])} == {"TPL301", "TPL302"}
    assert {f.code for f in lint_source(src, select=["ALL"], ignore=["TPL30"])} == {"TPL401"}
    with pytest.raises(ValueError, match=r"TPL999.*names no rule; valid codes are TPL001"):
        lint_source(src, select=["TPL999"])


def test_syntax_error_is_a_finding_at_its_line() -> None:
    (finding,) = lint_source("import torch\n\ndef f(:\n    pass\n", "bad.py")
    assert (finding.code, finding.line) == ("TPL001", 3)
    assert "cannot parse" in finding.message
    assert lint_source("def f(:\n", ignore=["TPL001"]) == []
