"""Every code block of README.md and docs/**/*.md works as written.

The convention, for whoever writes documentation here (docs/internals/docs.md says the
same):

- A ```python block runs. The blocks of one Markdown file run in order in one namespace,
  as a doctest's examples do, so a block may use what an earlier block of the same file
  defined; each file starts afresh. All files run in one process (torch imported once).
- A ```python block whose first line is ``# examples/NAME.py`` (or another path of the
  repository) shows that file: it must be the file, line for line, after that first line.
- A ```bash block runs with bash from the repository root, with this environment's
  ``bin`` first on PATH (``torchplace``, ``python`` and ``pytest`` are the project's). Each
  command must exit 0, or with the code its comment names (``# exits 1``).
- A ```text block is output, or anything else that is not run.
- A ```bash block directly preceded by the line ``<!-- docs: slow -->`` reproduces a long
  measurement: it is not run; each program it names must exist and its ``--help`` must
  list every option the command gives it.
- A ```python block directly preceded by ``<!-- docs: lint TPL101 -->`` is an example for
  ``torchplace lint``: not run but linted, and it must produce that rule's finding
  (``<!-- docs: lint no TPL101 -->``: must not).
- Blocks run on a CPU-only machine in seconds, and write nothing into the repository
  (outside caches such as ``__pycache__``): ``git status --ignored`` is the same after.

The whole harness is one Python process for the python blocks and the --help checks, and
one bash process per bash block.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import docs_blocks
from docs_blocks import ROOT, Block

_BLOCKS = docs_blocks.all_blocks()
_RUN = [b for b in _BLOCKS if b.lang in ("python", "bash")]
_CACHES = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TORCHPLACE_DEVICE")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update(PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg", PYTHONPATH=str(ROOT / "src"))
    return env


def _status() -> set[str]:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line for line in out.splitlines() if not any(c in line for c in _CACHES)}


def _python_tasks() -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = []
    for b in _RUN:
        if b.lang == "python" and b.lint is None:
            tasks.append({"kind": "python", "id": b.id, "path": b.path, "line": b.line,
                          "code": b.code})  # fmt: skip
        if b.lang == "bash" and b.slow:
            for n, (command, _) in enumerate(docs_blocks.commands(b.code)):
                for m, check in enumerate(docs_blocks.slow_checks(command)):
                    if "program" not in check:
                        tasks.append({"kind": "help", "id": f"{b.id}#{n}.{m}", **check})
    return tasks


@pytest.fixture(scope="module")
def results() -> Iterator[dict[str, Any]]:
    """Run every block once: the python ones and the --help checks in one process."""
    before = _status()
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="torchplace-docs-") as tmp:
        tasks_path, results_path = Path(tmp) / "tasks.json", Path(tmp) / "results.json"
        tasks_path.write_text(json.dumps(_python_tasks()))
        ran = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("docs_blocks.py")),
             str(tasks_path), str(results_path)],
            cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if not results_path.exists():
            raise RuntimeError(f"the docs runner failed:\n{ran.stdout}\n{ran.stderr}")
        for r in json.loads(results_path.read_text()):
            found[r["id"]] = r
    for b in _RUN:
        if b.lang == "bash" and not b.slow:
            done = subprocess.run(
                ["bash", "-c", docs_blocks.bash_script(b.code)],
                cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            found[b.id] = {"returncode": done.returncode, "stdout": done.stdout,
                           "stderr": done.stderr}  # fmt: skip
    found["written"] = _status() - before
    yield found


@pytest.mark.parametrize("block", _RUN, ids=[b.id for b in _RUN])
def test_block(block: Block, results: dict[str, Any]) -> None:
    if block.lint is not None:
        from torchplace.lint import lint_source

        fires, code = block.lint
        codes = {f.code for f in lint_source(block.code, block.path)}
        assert (code in codes) is fires, (
            f"{block.id}: torchplace lint {'does not find' if fires else 'finds'} {code} "
            f"(it finds {sorted(codes) or 'nothing'})"
        )
        return
    if block.shows_file:
        shown = block.code.split("\n", 1)[1]
        actual = (ROOT / block.shows_file).read_text(encoding="utf-8")
        assert shown.strip() == actual.strip(), f"{block.id} is not {block.shows_file} as it is"
    if block.lang == "python":
        r = results[block.id]
        assert r["error"] is None, f"{block.id} failed:\n{r['error']}"
    elif block.slow:
        _check_slow(block, results)
    else:
        r = results[block.id]
        assert r["returncode"] == 0, f"{block.id}:\n{r['stderr'][-3000:]}\n{r['stdout'][-2000:]}"


def _check_slow(block: Block, results: dict[str, Any]) -> None:
    for n, (command, _) in enumerate(docs_blocks.commands(block.code)):
        for m, check in enumerate(docs_blocks.slow_checks(command)):
            if "program" in check:
                program = check["program"]
                found = (ROOT / program).exists() or any(
                    (Path(p) / program).exists() for p in _env()["PATH"].split(os.pathsep)
                )
                assert found, f"{block.id}: {program!r} is not a program here"
                continue
            r = results[f"{block.id}#{n}.{m}"]
            assert r["error"] is None, f"{block.id}: {command}\n{r['error']}"
            missing = [o for o in check["options"] if o not in r["output"]]
            assert not missing, f"{block.id}: {command}: --help does not list {missing}"


def test_nothing_is_written_into_the_repository(results: dict[str, Any]) -> None:
    assert not results["written"], f"the blocks wrote into the repository: {results['written']}"


def test_readme_set_up_and_test_commands_are_what_ci_runs() -> None:
    """.ci/run runs the README's first block and its test command verbatim."""
    first = next(b for b in _BLOCKS if b.path == "README.md" and b.lang == "bash")
    ci = (ROOT / ".ci" / "run").read_text()
    for line in first.code.strip().splitlines():
        assert line in ci.splitlines(), f".ci/run does not run the README's {line!r}"
    readme = (ROOT / "README.md").read_text()
    assert "`.venv/bin/python -m pytest -q`" in readme
    assert ".venv/bin/python -m pytest -q" in ci.splitlines()
