"""Find device mistakes in PyTorch source code before anything runs.

One line per finding, `path:line:col: CODE message`, as compilers and editors print
them. Folders are searched for *.py files, skipping what .gitignore ignores. Exit code:
0 when nothing is found, 1 when something is, 2 on bad usage. `# noqa: TPL101` at the
end of a line silences that rule there. Rules: `torchplace lint --list-rules`, or
docs/lint.md. torch is not imported.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["add_arguments", "run"]

_PROGRESS_MIN_FILES = 200


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register ``torchplace lint``'s options."""
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="files and folders to check (default: .)"
    )
    parser.add_argument(
        "--select",
        action="append",
        metavar="CODES",
        help="only these rules: codes or prefixes, comma-separated (e.g. TPL1,TPL203)",
    )
    parser.add_argument(
        "--ignore", action="append", metavar="CODES", help="skip these rules (codes or prefixes)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the findings as JSON on stdout instead of lines"
    )
    parser.add_argument(
        "--sarif",
        metavar="FILE",
        help="also write the findings as SARIF 2.1.0 to FILE ('-' for stdout), for code scanning",
    )
    parser.add_argument(
        "--fix",
        action="store_true",
        help="apply the fixes that cannot change what the program computes, in place",
    )
    parser.add_argument(
        "--no-gitignore", action="store_true", help="also check files that .gitignore ignores"
    )
    parser.add_argument(
        "--list-rules", action="store_true", help="print every rule (code, name, fixable) and exit"
    )


def _list_rules(as_json: bool) -> int:
    from torchplace.lint.rules import RULES

    if as_json:
        rows = [
            {
                "code": r.code,
                "name": r.name,
                "title": r.title,
                "fixable": r.fixable,
                "hint": r.hint,
                "sim_events": list(r.sim_events),
                "doc": r.doc,
            }
            for r in RULES.values()
        ]
        print(json.dumps(rows, indent=2))
        return 0
    for r in RULES.values():
        fix = "fixable" if r.fixable else "       "
        print(f"{r.code}  {fix}  {r.name:<36} {r.title}")
    return 0


def _progress(enabled: bool) -> tuple[Any, Callable[[int, int, str], None]]:
    """A rich progress bar on stderr, shown once a run has many files."""
    from contextlib import nullcontext

    if not enabled:
        return nullcontext(), lambda done, total, path: None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    bar = Progress(
        TextColumn("torchplace lint"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task("", total=None)

    def step(done: int, total: int, path: str) -> None:
        if total >= _PROGRESS_MIN_FILES:
            if not bar.live.is_started:
                bar.start()
            bar.update(task, completed=done, total=total, description=path[-50:])

    return bar, step


def run(args: argparse.Namespace) -> int:
    """Lint (or fix) the paths; print findings; return 0 (clean), 1 (findings)."""
    from torchplace.lint.engine import lint_paths
    from torchplace.lint.fixes import fix_paths
    from torchplace.lint.output import format_text, summary_line, to_json, to_sarif
    from torchplace.lint.rules import resolve_codes

    if args.list_rules:
        return _list_rules(args.json)
    resolve_codes(args.select, args.ignore)  # bad codes: exit 2 before reading any file
    paths = args.paths or ["."]
    show_progress = sys.stderr.isatty() and not args.json and args.sarif != "-"
    bar, step = _progress(show_progress)
    engine = fix_paths if args.fix else lint_paths
    with bar:
        result = engine(
            paths,
            select=args.select,
            ignore=args.ignore,
            respect_gitignore=not args.no_gitignore,
            progress=step,
        )
    if args.sarif:
        sarif = json.dumps(to_sarif(result), indent=2)
        if args.sarif == "-":
            print(sarif)
        else:
            Path(args.sarif).write_text(sarif + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(to_json(result), indent=2))
    elif args.sarif != "-":
        text = format_text(result)
        if text:
            print(text)
        for skipped in result.skipped:
            print(f"skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
        print(summary_line(result), file=sys.stderr)
    return 1 if result.findings else 0
