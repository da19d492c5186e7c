"""``--fix``: apply the fixes that cannot change what a program computes.

Only rules marked fixable in ``torchplace.lint.rules`` offer fixes, and only where the
rewrite keeps every value the program computes (docs/lint.md says, per rule, when a fix
is offered). Fixes are text edits at positions Python's own parser gives; they are
applied from the end of the file backwards, overlapping ones wait for the next pass,
and a result that does not parse is never written.

Examples:
    >>> src = "import torch\\nx = torch.zeros(3).to(device)\\n"
    >>> new, fixed, left = fix_source(src)
    >>> print(new, end="")
    import torch
    x = torch.zeros(3, device=device)
    >>> fixed, left
    (1, [])
"""

from __future__ import annotations

import ast
import io
import os
import tokenize
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from torchplace.lint.config import LintConfig
from torchplace.lint.engine import (
    LintResult,
    Skipped,
    _codes_for,
    _context_path,
    _syntax_finding,
    lint_source,
)
from torchplace.lint.files import iter_python_files
from torchplace.lint.finding import Edit, Finding
from torchplace.lint.rules import resolve_codes

__all__ = ["apply_fixes", "fix_paths", "fix_source"]

_MAX_PASSES = 10


def apply_fixes(source: str, findings: Iterable[Finding]) -> tuple[str, int]:
    """Apply the fixes of ``findings`` that do not overlap; return the text and how many.

    Examples:
        >>> from torchplace.lint.finding import Fix
        >>> f = Finding("x.py", 1, 1, "TPL303", "m", fix=Fix("d", (Edit(8, 8, ".detach()"),)))
        >>> apply_fixes("acc(loss)", [f])
        ('acc(loss.detach())', 1)
    """
    chosen: list[Edit] = []
    taken: list[tuple[int, int]] = []
    count = 0
    fixes = sorted(
        (f.fix for f in findings if f.fix is not None),
        key=lambda fx: min(e.start for e in fx.edits),
    )
    for fix in fixes:
        spans = [(e.start, e.end) for e in fix.edits]
        if any(_overlap(a, b) for a in spans for b in taken):
            continue
        taken.extend(spans)
        chosen.extend(fix.edits)
        count += 1
    for edit in sorted(chosen, key=lambda e: (e.start, e.end), reverse=True):
        source = edit.apply(source)
    return source, count


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Spans that touch count as overlapping: the later fix waits for the next pass."""
    return a[0] <= b[1] and b[0] <= a[1]


def _parses(source: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def fix_source(
    source: str,
    path: str = "<string>",
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    codes: Sequence[str] | None = None,
    context_path: str | None = None,
) -> tuple[str, int, list[Finding]]:
    """Fix what can be fixed safely, re-linting after each pass (at most 10).

    ``context_path`` is where the file sits in the project, as for
    :func:`~torchplace.lint.engine.lint_source`.

    Returns:
        ``(new_source, fixed, remaining)``: the rewritten text, how many findings were
        fixed, and the findings of the rewritten text.
    """
    active = tuple(codes) if codes is not None else resolve_codes(select, ignore)
    fixed = 0
    findings = lint_source(source, path, codes=active, context_path=context_path)
    for _ in range(_MAX_PASSES):
        fixable = [f for f in findings if f.fix is not None]
        if not fixable:
            break
        new, count = apply_fixes(source, fixable)
        if count == 0 or new == source or not _parses(new):
            break
        source, fixed = new, fixed + count
        findings = lint_source(source, path, codes=active, context_path=context_path)
    return source, fixed, findings


def _read(path: Path) -> tuple[str, str, str] | Skipped:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return Skipped(str(path), "binary file")
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    newline = "\r\n" if "\r\n" in text else "\n"
    return text.replace("\r\n", "\n"), encoding, newline


def fix_paths(
    paths: Sequence[str | os.PathLike[str]],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    respect_gitignore: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
    config: LintConfig | None = None,
) -> LintResult:
    """Fix files in place (same encoding and line endings), then report what is left.

    Returns:
        A :class:`LintResult` whose ``findings`` are those left after fixing and whose
        ``fixed`` counts the fixes applied.
    """
    codes = config.codes(select, ignore) if config else resolve_codes(select, ignore)
    files = list(iter_python_files(paths, respect_gitignore=respect_gitignore))
    result = LintResult()
    roots = [Path(p) for p in paths]
    for i, file in enumerate(files, 1):
        if progress is not None:
            progress(i, len(files), str(file))
        try:
            read = _read(file)
        except OSError as e:
            result.skipped.append(Skipped(str(file), f"cannot read: {e.strerror or e}"))
            continue
        except (UnicodeDecodeError, SyntaxError, LookupError) as e:
            result.files += 1
            if "TPL001" in codes:
                result.findings.append(_syntax_finding(str(file), e))
            continue
        if isinstance(read, Skipped):
            result.skipped.append(read)
            continue
        text, encoding, newline = read
        new, fixed, findings = fix_source(
            text,
            str(file),
            codes=_codes_for(file, codes, config),
            context_path=_context_path(file, roots),
        )
        if fixed:
            with open(file, "w", encoding=encoding, newline=newline) as f:
                f.write(new)
        result.files += 1
        result.lines += new.count("\n") + (0 if new.endswith("\n") or not new else 1)
        result.fixed += fixed
        result.findings.extend(findings)
    result.findings.sort()
    return result
