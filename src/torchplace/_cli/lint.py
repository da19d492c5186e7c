"""Find device mistakes in PyTorch source code before anything runs.

One line per finding, `path:line:col: CODE message`, as compilers and editors print
them. Folders are searched for *.py files, skipping what .gitignore ignores. Exit code:
0 when nothing is found (or with --exit-zero), 1 when something is, 2 on bad usage.
`# noqa: TPL101` at the end of a line silences that rule there; rule selection and
per-file ignores can live in pyproject.toml ([tool.torchplace.lint]). Rules:
`torchplace lint --list-rules`, or docs/lint.md. torch is not imported.
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
    # integrations (issue 25): CI formats, counts, exit status, pyproject.toml configuration
    parser.add_argument(
        "--format",
        choices=("text", "json", "github", "sarif"),
        help="output on stdout: text (default), json (as --json), github (GitHub Actions "
        "annotations), sarif (as --sarif -)",
    )
    parser.add_argument(
        "--statistics",
        action="store_true",
        help="print how many findings each rule has instead of the findings",
    )
    parser.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 even when something is found (2 still means bad usage)",
    )
    parser.add_argument(
        "--config",
        metavar="PYPROJECT",
        help="read [tool.torchplace.lint] from this pyproject.toml (default: the nearest "
        "one above the working folder that has the table)",
    )
    parser.add_argument(
        "--isolated", action="store_true", help="ignore any pyproject.toml configuration"
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
                "default": r.default,
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
        off = "" if r.default else f"  (off by default: --select {r.code})"
        print(f"{r.code}  {fix}  {r.name:<36} {r.title}{off}")
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


def _config(args: argparse.Namespace) -> Any:
    from torchplace.lint.config import find_config, load_config

    if args.isolated:
        return None
    path = args.config or find_config(".")
    return load_config(path) if path else None


def run(args: argparse.Namespace) -> int:
    """Lint (or fix) the paths; print findings; return 0 (clean), 1 (findings)."""
    from torchplace.lint.engine import lint_paths
    from torchplace.lint.fixes import fix_paths
    from torchplace.lint.output import (
        format_github,
        format_statistics,
        format_text,
        summary_line,
        to_json,
        to_sarif,
    )

    output = args.format or ("json" if args.json else "text")
    if args.list_rules:
        return _list_rules(output == "json")
    config = _config(args)
    # bad codes: exit 2 before reading any file
    if config is not None:
        config.codes(args.select, args.ignore)
    else:
        from torchplace.lint.rules import resolve_codes

        resolve_codes(args.select, args.ignore)
    sarif_path = "-" if output == "sarif" else args.sarif
    paths = args.paths or ["."]
    show_progress = sys.stderr.isatty() and output == "text" and sarif_path != "-"
    bar, step = _progress(show_progress)
    engine = fix_paths if args.fix else lint_paths
    with bar:
        result = engine(
            paths,
            select=args.select,
            ignore=args.ignore,
            respect_gitignore=not args.no_gitignore,
            progress=step,
            config=config,
        )
    if sarif_path:
        sarif = json.dumps(to_sarif(result), indent=2)
        if sarif_path == "-":
            print(sarif)
        else:
            Path(sarif_path).write_text(sarif + "\n", encoding="utf-8")
    if args.statistics and output == "text":
        text = format_statistics(result)
        if text:
            print(text)
    elif output == "json":
        print(json.dumps(to_json(result), indent=2))
    elif output == "github":
        text = format_github(result)
        if text:
            print(text)
    elif output == "text" and sarif_path != "-":
        text = format_text(result)
        if text:
            print(text)
    if output in ("text", "github") and sarif_path != "-":
        for skipped in result.skipped:
            print(f"skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
        print(summary_line(result), file=sys.stderr)
    return 1 if result.findings and not args.exit_zero else 0
