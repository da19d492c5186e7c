"""The code blocks of README.md and docs/**/*.md, and how each is checked (tests/test_docs.py).

Run as a script, this is the one Python process that runs every ```python block (one
namespace per Markdown file, in order) and every ``--help`` of a Python program that a
slow block names: it reads its tasks from a JSON file and writes the results to another.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import runpy
import shlex
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SLOW = "<!-- docs: slow -->"
_LINT = re.compile(r"<!-- docs: lint (no )?(TPL\d+) -->")
_FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)")
_EXPECTED_EXIT = re.compile(r"#.*\bexits? (\d+)\b")
_SHOWS_FILE = re.compile(r"^# ((?:examples|benchmarks|tests|src)/[\w/.-]+\.py)$")


@dataclass
class Block:
    """A fenced code block: where it is, its language, its text and how to check it."""

    path: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    slow: bool = False
    lint: tuple[bool, str] | None = None  # (must fire, rule code)

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def shows_file(self) -> str | None:
        """``examples/x.py`` when the block's first line says it shows that file."""
        first = self.code.split("\n", 1)[0].strip()
        match = _SHOWS_FILE.match(first)
        return match.group(1) if match else None


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file."""
    rel = str(path.relative_to(ROOT))
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, lang = match.group(1), match.group(2).lower()
        before = lines[i - 1].strip() if i else ""
        end = i + 1
        while end < len(lines) and not lines[end].startswith(fence[:3]):
            end += 1
        lint = _LINT.fullmatch(before)
        out.append(
            Block(
                rel,
                i + 1,
                lang,
                "\n".join(lines[i + 1 : end]) + "\n",
                slow=before == SLOW,
                lint=(lint.group(1) is None, lint.group(2)) if lint else None,
            )
        )
        i = end + 1
    return out


def all_blocks() -> list[Block]:
    return [b for path in markdown_files() for b in blocks(path)]


# --- bash -------------------------------------------------------------------------------


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")


def commands(code: str) -> list[tuple[str, int]]:
    """The block's commands (continuation lines joined, a here-document kept with its
    command) and the exit code each expects: 0, or N when its comment says ``exits N``."""
    out: list[tuple[str, int]] = []
    pending = ""
    lines = iter(code.splitlines())
    for raw in lines:
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        expected = _EXPECTED_EXIT.search(line)
        heredoc = _HEREDOC.search(line.split("#", 1)[0])
        if heredoc:
            body = [line]
            for more in lines:
                body.append(more)
                if more.strip() == heredoc.group(2):
                    break
            line = "\n".join(body)
        out.append((line, int(expected.group(1)) if expected else 0))
    return out


def bash_script(code: str) -> str:
    """A bash script that runs each command and stops at the first unexpected exit code."""
    parts = ["set -o pipefail"]
    for n, (command, expected) in enumerate(commands(code), 1):
        message = shlex.quote(f"docs: command {n} exited with an unexpected code: {command}")
        parts.append(
            f'{command}\nrc=$?; if [ $rc -ne {expected} ]; then echo {message} "(exit $rc, '
            f'expected {expected})" >&2; exit 1; fi'
        )
    return "\n".join(parts) + "\n"


def _words(command: str) -> list[str]:
    """A command's words, without its comment, environment assignments or redirections."""
    words = shlex.split(command, comments=True)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        words = words[1:]
    out = []
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w in (">", ">>", "<", "2>", "|"):
            skip = w != "|"
            if w == "|":
                break
            continue
        out.append(w)
    return out


def slow_checks(command: str) -> list[dict[str, Any]]:
    """What to check of a slow block's command: each program it runs (its ``--help``) and
    the options it gives that program. Commands joined with ``&&`` are checked each."""
    checks = []
    for part in command.split("&&"):
        words = _words(part)
        if not words:
            continue
        program = Path(words[0]).name
        if program.startswith("python"):
            if words[1:2] == ["-m"]:
                module, rest = words[2], words[3:]
                checks.append({"argv": ["-m", module], "options": _options(rest)})
            else:
                script = next((w for w in words[1:] if not w.startswith("-")), None)
                if script is None:
                    continue
                rest = words[words.index(script) + 1 :]
                checks.append({"script": script, "options": _options(rest)})
        elif program == "torchplace":
            sub = words[1]
            rest = words[2:]
            target = next((w for w in rest if w.endswith(".py")), None)
            mine = rest if target is None else rest[: rest.index(target)]
            checks.append({"torchplace": sub, "options": _options(mine)})
            if target is not None:
                checks.append(
                    {"script": target, "options": _options(rest[rest.index(target) + 1 :])}
                )
        else:
            checks.append({"program": words[0], "options": _options(words[1:])})
    return checks


def _options(words: list[str]) -> list[str]:
    return [w.split("=", 1)[0] for w in words if w.startswith("-") and w not in ("-", "--")]


# --- the runner process -----------------------------------------------------------------


def _run_python(blocks_of_file: list[dict[str, Any]]) -> list[dict[str, Any]]:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    results = []
    for task in blocks_of_file:
        start = time.perf_counter()
        out = io.StringIO()
        try:
            code = compile(task["code"], f"{task['path']}:{task['line']}", "exec")
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
            error = None
        except BaseException:  # a block's failure, whatever it is, is the block's result
            error = traceback.format_exc(limit=-6)
        results.append(
            {"id": task["id"], "error": error, "output": out.getvalue()[-2000:],
             "seconds": time.perf_counter() - start}
        )  # fmt: skip
    return results


def _help(task: dict[str, Any]) -> dict[str, Any]:
    """Run a Python program with --help in this process; return its help text."""
    out = io.StringIO()
    saved = sys.argv[:]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            if "torchplace" in task:
                from torchplace.cli import main

                sys.argv = ["torchplace", task["torchplace"], "--help"]
                main([task["torchplace"], "--help"])
            elif "script" in task:
                path = ROOT / task["script"]
                if not path.is_file():
                    return {"id": task["id"], "error": f"no such script: {task['script']}"}
                sys.argv = [str(path), "--help"]
                sys.path.insert(0, str(path.parent))
                try:
                    runpy.run_path(str(path), run_name="__main__")
                finally:
                    sys.path.remove(str(path.parent))
            else:
                sys.argv = [task["argv"][1], "--help"]
                runpy.run_module(task["argv"][1], run_name="__main__", alter_sys=True)
        code: Any = 0
    except SystemExit as e:
        code = e.code
    except BaseException:
        return {"id": task["id"], "error": traceback.format_exc(limit=-6)}
    finally:
        sys.argv = saved
    if code not in (0, None):
        return {"id": task["id"], "error": f"--help exited {code}: {out.getvalue()[-1500:]}"}
    return {"id": task["id"], "error": None, "output": out.getvalue()}


def main(argv: list[str]) -> None:
    """``python tests/docs_blocks.py TASKS.json RESULTS.json``."""
    tasks = json.loads(Path(argv[0]).read_text())
    results: list[dict[str, Any]] = []
    by_file: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        if task["kind"] == "python":
            by_file.setdefault(task["path"], []).append(task)
    for group in by_file.values():
        results += _run_python(group)
    results += [_help(t) for t in tasks if t["kind"] == "help"]
    Path(argv[1]).write_text(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
