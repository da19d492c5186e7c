"""docs/lint.md's examples run as written and print what the page shows.

Every ```bash and ```python block (except one after ``<!-- docs: slow -->``) runs from the
repository root; where a ```text block follows, the program's stdout must be exactly it.
Each rule's section has an example that lints a wrong and a right program and shows a
finding of that rule on the wrong one only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "lint.md").read_text()
BLOCK = re.compile(r"```(\w+)\n(.*?)```\n", re.S)


def _blocks() -> list[tuple[str, str, str | None]]:
    """(language, code, the text block right after it or None), runnable ones only."""
    found = []
    matches = list(BLOCK.finditer(PAGE))
    for i, m in enumerate(matches):
        lang, code = m.group(1), m.group(2)
        if lang not in ("bash", "python"):
            continue
        if PAGE[: m.start()].rstrip().endswith("<!-- docs: slow -->"):
            continue
        nxt = matches[i + 1] if i + 1 < len(matches) else None
        between = PAGE[m.end() : nxt.start()] if nxt else ""
        expected = nxt.group(2) if nxt and nxt.group(1) == "text" and not between.strip() else None
        found.append((lang, code, expected))
    return found


BLOCKS = _blocks()


@pytest.mark.parametrize(("lang", "code", "expected"), BLOCKS, ids=range(len(BLOCKS)))
def test_example_runs_and_prints_what_the_page_shows(
    lang: str, code: str, expected: str | None
) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = ["bash", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    if expected is not None:
        assert done.stdout == expected


def test_every_rule_has_an_example_that_fires_on_the_wrong_program_only() -> None:
    from torchplace.lint import RULES

    for code in RULES:
        if code == "TPL001":
            continue
        section = PAGE.split(f"### {code} ", 1)[1].split("\n### ", 1)[0]
        output = section.split("```text\n", 1)[1].split("```", 1)[0]
        lines = output.splitlines()
        assert lines and all(line.startswith("wrong.py:") for line in lines), code
        assert all(f" {code} " in line for line in lines), code
