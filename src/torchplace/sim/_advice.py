"""The linter's rules for what a simulation saw, so a report names the pattern and its fix.

A sync recorded at a line of the script is linked to a finding of a rule that produces that
kind of sync (``torchplace.lint.rules_for_sim_event``) on the same line (the finding may
span several lines). A device error is linked to a finding of a device rule in the function
that raised it: the tensor made without ``device=`` is usually a line or two above the
operation that mixes devices.
"""

from __future__ import annotations

import ast
import functools
import os
from typing import Any

__all__ = ["error_kind", "link"]


def error_kind(message: str) -> str | None:
    """The simulator event kind of a device error message, or None."""
    if "invalid device ordinal" in message:
        return "invalid device"
    same = ("same device", "indices should be either on cpu", "expected device")
    if any(s in message for s in same) or ("Input type (" in message and "should be" in message):
        return "device mismatch"
    return None


@functools.cache
def _findings(path: str) -> tuple[Any, ...]:
    from torchplace.lint import lint_file

    # every rule, opt-in ones too: the run itself showed the event a finding is linked to
    try:
        return tuple(lint_file(path, select=["ALL"]))
    except (OSError, ValueError):
        return ()


@functools.cache
def _functions(path: str) -> tuple[tuple[int, int], ...]:
    """(first, last) line of every function in the file."""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple(
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    )


def link(
    file: str | None, line: int | None, kind: str, *, in_function: bool = False
) -> list[dict[str, Any]]:
    """Findings of the rules for ``kind`` at ``file:line`` (or, with ``in_function``, in
    the innermost function around it) as report entries: code, line, message, hint, doc."""
    from torchplace.lint import RULES, rules_for_sim_event

    codes = rules_for_sim_event(kind)
    if not codes or not file or line is None or not os.path.isfile(file):
        return []
    first, last = line, line
    if in_function:
        around = [span for span in _functions(file) if span[0] <= line <= span[1]]
        if around:
            first, last = max(around)  # the innermost: the one that starts last
    return [
        {
            "code": f.code,
            "line": f.line,
            "message": f.message,
            "hint": f.hint,
            "doc": RULES[f.code].doc,
        }
        for f in _findings(file)
        if f.code in codes and f.line <= last and max(f.end_line, f.line) >= first
    ]
