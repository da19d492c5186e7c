"""Findings as text (compiler format), JSON and SARIF 2.1.0.

The JSON layout is described by ``torchplace/data/lint-report.schema.json`` (JSON Schema
draft 2020-12) and versioned by ``schema_version``; SARIF is the OASIS standard that
code-scanning pages (GitHub, GitLab, Azure DevOps) read. Both carry the same findings.

Examples:
    >>> from torchplace.lint.engine import LintResult
    >>> from torchplace.lint.finding import Finding
    >>> result = LintResult([Finding("a.py", 3, 5, "TPL401", "use DDP")], files=1, lines=10)
    >>> print(format_text(result))
    a.py:3:5: TPL401 use DDP
    >>> to_json(result)["summary"]["by_code"]
    {'TPL401': 1}
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from torchplace.lint.engine import LintResult
from torchplace.lint.rules import RULES

__all__ = [
    "JSON_SCHEMA_VERSION",
    "SARIF_SCHEMA_URI",
    "format_github",
    "format_statistics",
    "format_text",
    "json_schema",
    "summary_line",
    "to_json",
    "to_sarif",
]

#: Bump when a key changes meaning or disappears; adding keys keeps the version.
JSON_SCHEMA_VERSION = 1
SARIF_SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/os/schemas/sarif-schema-2.1.0.json"
)
_SCHEMA_FILE = Path(__file__).resolve().parent.parent / "data" / "lint-report.schema.json"


def format_text(result: LintResult) -> str:
    """One ``path:line:col: CODE message`` line per finding."""
    return "\n".join(f.format() for f in result.findings)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(result: LintResult) -> str:
    """GitHub Actions workflow commands: one ``::warning`` (``::error`` for TPL001) per
    finding, which GitHub shows on the pull request's changed lines.

    Examples:
        >>> from torchplace.lint.finding import Finding
        >>> result = LintResult([Finding("a.py", 3, 5, "TPL401", "use DDP", 3, 20)])
        >>> print(format_github(result))
        ::warning file=a.py,line=3,col=5,endLine=3,endColumn=20,title=TPL401 data-parallel::use DDP
    """
    lines = []
    for f in result.findings:
        level = "error" if f.code == "TPL001" else "warning"
        props = [f"file={_escape_property(f.path)}", f"line={f.line}", f"col={f.col}"]
        if f.end_line:
            props += [f"endLine={f.end_line}", f"endColumn={f.end_col or f.col}"]
        props.append(f"title={_escape_property(f'{f.code} {RULES[f.code].name}')}")
        lines.append(f"::{level} {','.join(props)}::{_escape_data(f.message)}")
    return "\n".join(lines)


def format_statistics(result: LintResult) -> str:
    """How many findings each rule has, most first (``--statistics``).

    Examples:
        >>> from torchplace.lint.finding import Finding
        >>> result = LintResult([Finding("a.py", 3, 5, "TPL401", "m")] * 2)
        >>> print(format_statistics(result))
        2  TPL401  data-parallel
    """
    counts = Counter(f.code for f in result.findings)
    fixable = Counter(f.code for f in result.findings if f.fixable)
    width = len(str(max(counts.values(), default=0)))
    rows = []
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        mark = f"  ({fixable[code]} fixable)" if fixable[code] else ""
        rows.append(f"{n:>{width}}  {code}  {RULES[code].name}{mark}")
    return "\n".join(rows)


def summary_line(result: LintResult) -> str:
    """A sentence for people: how much was checked and found (and fixed).

    Examples:
        >>> summary_line(LintResult(files=2, lines=1500))
        'All clean: 2 files, 1,500 lines checked.'
    """
    files = f"{result.files:,} file{'s' if result.files != 1 else ''}"
    checked = f"{files}, {result.lines:,} lines checked"
    fixed = f"Fixed {result.fixed:,}. " if result.fixed else ""
    n = len(result.findings)
    if not n:
        return f"{fixed}All clean: {checked}."
    fixable = sum(f.fixable for f in result.findings)
    in_files = len({f.path for f in result.findings})
    more = f" ({fixable:,} fixable with --fix)" if fixable else ""
    return f"{fixed}Found {n:,} finding{'s' if n != 1 else ''}{more} in {in_files:,} of {checked}."


def to_json(result: LintResult) -> dict[str, Any]:
    """The findings and counts as JSON-ready data (see :func:`json_schema`)."""
    from torchplace import __version__

    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": {"name": "torchplace lint", "version": __version__},
        "summary": {
            "files": result.files,
            "lines": result.lines,
            "findings": len(result.findings),
            "fixable": sum(f.fixable for f in result.findings),
            "fixed": result.fixed,
            "by_code": dict(sorted(Counter(f.code for f in result.findings).items())),
        },
        "findings": [f.to_dict() for f in result.findings],
        "skipped": [{"path": s.path, "reason": s.reason} for s in result.skipped],
    }


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that :func:`to_json` output follows."""
    schema: dict[str, Any] = json.loads(_SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema


class _Placeholder(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return f"<{key}>"


def _artifact(path: str, base: Path) -> dict[str, str]:
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(base)
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": quote(relative.as_posix()), "uriBaseId": "SRCROOT"}


def to_sarif(result: LintResult, *, base: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The findings as a SARIF 2.1.0 log with one run.

    Args:
        result: what a lint run found.
        base: the folder relative URIs start from (``SRCROOT``; default: the working
            folder). Files outside it get absolute ``file://`` URIs.
    """
    from torchplace import __version__

    root = Path(os.path.abspath(base if base is not None else os.getcwd()))
    codes = list(RULES)
    rules = []
    for rule in RULES.values():
        rules.append(
            {
                "id": rule.code,
                "name": "".join(p.capitalize() for p in rule.name.split("-")),
                "shortDescription": {"text": rule.title},
                "fullDescription": {"text": rule.message.format_map(_Placeholder())},
                "help": {"text": f"{rule.hint}. Documentation: {rule.doc}"},
                "defaultConfiguration": {
                    "level": "error" if rule.code == "TPL001" else "warning",
                    "enabled": rule.default,
                },
                "properties": {"fixable": rule.fixable, "tags": ["pytorch", "gpu"]},
            }
        )
    results = []
    for f in result.findings:
        results.append(
            {
                "ruleId": f.code,
                "ruleIndex": codes.index(f.code),
                "level": "error" if f.code == "TPL001" else "warning",
                "message": {"text": f.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": _artifact(f.path, root),
                            "region": {
                                "startLine": f.line,
                                "startColumn": f.col,
                                "endLine": f.end_line or f.line,
                                "endColumn": f.end_col or f.col,
                            },
                        }
                    }
                ],
                "properties": {"fixable": f.fixable},
            }
        )
    notifications = [
        {
            "level": "note",
            "message": {"text": f"skipped: {s.reason}"},
            "locations": [{"physicalLocation": {"artifactLocation": _artifact(s.path, root)}}],
        }
        for s in result.skipped
    ]
    return {
        "$schema": SARIF_SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "torchplace lint",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"SRCROOT": {"uri": root.as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "invocations": [
                    {"executionSuccessful": True, "toolExecutionNotifications": notifications}
                ],
                "results": results,
            }
        ],
    }
