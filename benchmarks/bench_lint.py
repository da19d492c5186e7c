"""How fast ``torchplace lint`` is: source lines per second of CPU time, on one core.

Side by side on the same files, in one process: Python's own ``ast.parse`` alone (the
floor: every AST linter pays it), then the lint with the rules on by default, then with
every rule (``--select ALL``): parse, rules, noqa. Times are CPU seconds
(``time.process_time``), the median of ``--rounds`` passes, so other jobs on the machine
inflate them little (not to zero: a busy machine's caches are shared). Files are read into
memory first.

    .venv/bin/python benchmarks/bench_lint.py                 # torchplace's own src/ and tests/
    .venv/bin/python benchmarks/bench_lint.py /tmp/lintrepos  # any folders of Python code

Goal (issue 25): at least 10,000 lines per second per core, every rule on.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import statistics
import sys
import time
import warnings
from pathlib import Path

from torchplace.lint import lint_source
from torchplace.lint.engine import read_source
from torchplace.lint.files import iter_python_files
from torchplace.lint.rules import resolve_codes

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent


def _load(paths: list[str]) -> list[tuple[str, str]]:
    sources = []
    for path in iter_python_files(paths):
        text = read_source(path)
        if isinstance(text, str):
            sources.append((str(path), text))
    return sources


def _parse_all(sources: list[tuple[str, str]]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path, text in sources:
            with contextlib.suppress(SyntaxError):
                ast.parse(text, filename=path)


def _linter(select: list[str] | None) -> object:
    codes = resolve_codes(select)

    def lint_all(sources: list[tuple[str, str]]) -> int:
        return sum(len(lint_source(text, path, codes=codes)) for path, text in sources)

    return lint_all


def _cpu_seconds(fn: object, sources: list[tuple[str, str]], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.process_time()
        fn(sources)  # type: ignore[operator]
        times.append(time.process_time() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="folders or files (default: src/ and tests/)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    paths = args.paths or [str(ROOT / "src"), str(ROOT / "tests")]
    sources = _load(paths)
    lines = sum(text.count("\n") for _, text in sources)
    if not lines:
        print("no Python source found", file=sys.stderr)
        return 2
    default, every = _linter(None), _linter(["ALL"])
    findings = default(sources), every(sources)  # type: ignore[operator]  # warm-up, counts
    parse = _cpu_seconds(_parse_all, sources, args.rounds)
    lint = _cpu_seconds(default, sources, args.rounds)
    lint_all = _cpu_seconds(every, sources, args.rounds)
    print(
        f"{len(sources)} files, {lines:,} lines, {findings[0]} findings by default "
        f"({findings[1]} with every rule); median of {args.rounds}"
    )
    print("| step | CPU s | lines/s per core |\n|---|---|---|")
    print(f"| ast.parse only | {parse:.3f} | {lines / parse:,.0f} |")
    print(f"| torchplace lint (rules on by default) | {lint:.3f} | {lines / lint:,.0f} |")
    print(f"| torchplace lint --select ALL | {lint_all:.3f} | {lines / lint_all:,.0f} |")
    verdict = "met" if lines / lint_all >= 10_000 else "MISSED"
    print(f"every rule / parse: {lint_all / parse:.1f}x; goal 10,000 lines/s per core: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
