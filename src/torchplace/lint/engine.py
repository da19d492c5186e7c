"""Lint source text, files and folders: parse, run the checks, honour ``# noqa``.

Examples:
    >>> src = "import torch\\nstate = torch.load('ckpt.pt', map_location='cpu')\\n"
    >>> [f.format() for f in lint_source(src, "train.py")]
    ['train.py:2:9: TPL302 `torch.load(...)` relies on the weights_only default, ...']
"""

from __future__ import annotations

import ast
import io
import os
import tokenize
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torchplace.lint.checks import Checker, RawFinding
from torchplace.lint.config import LintConfig
from torchplace.lint.files import iter_python_files
from torchplace.lint.finding import Finding
from torchplace.lint.rules import RULES, resolve_codes

__all__ = ["LintResult", "Skipped", "lint_file", "lint_paths", "lint_source", "read_source"]

_BINARY_SNIFF = 8192


@dataclass(frozen=True)
class Skipped:
    """A file that was not linted, and why."""

    path: str
    reason: str


@dataclass
class LintResult:
    """What a run over files found.

    Attributes:
        findings: every finding, sorted by path, line, column, code.
        files: how many files were linted (parsed or not).
        lines: how many source lines they had.
        skipped: files not linted (binary, unreadable).
        fixed: how many findings ``--fix`` resolved.
    """

    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    lines: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    fixed: int = 0


def _noqa_lines(source: str) -> dict[int, frozenset[str] | None]:
    """Line -> codes silenced there (``None``: every code, a bare ``# noqa``)."""
    result: dict[int, frozenset[str] | None] = {}
    if "noqa" not in source.lower():
        return result
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return result
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        text = tok.string.lstrip("#").strip()
        lowered = text.lower()
        at = lowered.find("noqa")
        if at < 0 or (at > 0 and lowered[at - 1] not in " #"):
            continue
        rest = text[at + 4 :]
        if not rest.startswith(":"):
            result[tok.start[0]] = None
            continue
        codes = []
        for part in rest[1:].replace(",", " ").split():
            part = part.strip().upper()
            if part[:1].isalpha() and part[-1:].isdigit():
                codes.append(part)
            else:
                break
        line = tok.start[0]
        previous = result.get(line, frozenset())
        result[line] = None if previous is None else previous | frozenset(codes)
    return result


def _silenced(finding: Finding, noqa: dict[int, frozenset[str] | None]) -> bool:
    if finding.line not in noqa:
        return False
    codes = noqa[finding.line]
    return codes is None or finding.code in codes


def _syntax_finding(path: str, error: BaseException, line: int = 1, col: int = 1) -> Finding:
    detail = getattr(error, "msg", None) or str(error) or type(error).__name__
    rule = RULES["TPL001"]
    return Finding(
        path, max(line, 1), max(col, 1), "TPL001", rule.message.format(detail=detail),
        hint=rule.hint,
    )  # fmt: skip


def lint_source(
    source: str,
    path: str = "<string>",
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    codes: Sequence[str] | None = None,
    context_path: str | None = None,
) -> list[Finding]:
    """Lint Python source text.

    Args:
        source: the program text.
        path: the name the findings carry.
        select: rule codes or prefixes to check (default: the rules on by default).
        ignore: rule codes or prefixes not to check.
        codes: an already resolved list of codes (overrides select/ignore).
        context_path: where the file sits in the project being linted (default:
            ``path``); a ``tests``/``test``/``testing`` folder in it, or a ``test_*.py``
            name, makes the file test code, which some rules judge differently.

    Returns:
        The findings, sorted by line and column, without those silenced by
        ``# noqa`` / ``# noqa: CODE`` on their line. A file that does not parse gives one
        ``TPL001`` finding at the syntax error.

    Raises:
        ValueError: ``select`` or ``ignore`` names no rule.
    """
    active = tuple(codes) if codes is not None else resolve_codes(select, ignore)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are not ours
            tree = ast.parse(source, filename=path)
        raw = Checker(tree, source, context_path or path).run(active)
    except SyntaxError as e:
        if "TPL001" not in active:
            return []
        return [_syntax_finding(path, e, e.lineno or 1, e.offset or 1)]
    except (ValueError, RecursionError, MemoryError) as e:
        if "TPL001" not in active:
            return []
        return [_syntax_finding(path, e)]
    lines = source.splitlines()
    findings = sorted({_to_finding(path, lines, r) for r in raw})
    noqa = _noqa_lines(source)
    return [f for f in findings if not _silenced(f, noqa)]


def _column(lines: list[str], line: int, col_bytes: int) -> int:
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    if text.isascii():
        return col_bytes + 1
    return len(text.encode("utf-8")[:col_bytes].decode("utf-8", "replace")) + 1


def _to_finding(path: str, lines: list[str], raw: RawFinding) -> Finding:
    node = raw.node
    line = node.lineno  # type: ignore[attr-defined]
    end_line = node.end_lineno or line  # type: ignore[attr-defined]
    end_col = node.end_col_offset if node.end_col_offset is not None else node.col_offset  # type: ignore[attr-defined]
    return Finding(
        path=path,
        line=line,
        col=_column(lines, line, node.col_offset),  # type: ignore[attr-defined]
        code=raw.code,
        message=raw.message,
        end_line=end_line,
        end_col=_column(lines, end_line, end_col),
        hint=RULES[raw.code].hint,
        fix=raw.fix,
    )


def read_source(path: str | os.PathLike[str]) -> str | Skipped:
    """The text of a Python file (PEP 263 encoding), or why it cannot be linted.

    Binary files (a NUL byte in the first 8 KiB) are :class:`Skipped`; text that does not
    decode raises ``UnicodeDecodeError``/``SyntaxError`` for the caller to report.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        return Skipped(str(path), f"cannot read: {e.strerror or e}")
    if b"\0" in data[:_BINARY_SNIFF]:
        return Skipped(str(path), "binary file")
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def lint_file(
    path: str | os.PathLike[str],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
) -> list[Finding]:
    """Lint one file; the findings carry ``str(path)``.

    A file that does not decode or parse gives one ``TPL001`` finding; a binary file
    gives none.

    Examples:
        >>> import tempfile, os
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = os.path.join(d, "m.py")
        ...     _ = open(p, "w").write("import torch\\nz = torch.zeros(3).to(device)\\n")
        ...     [(f.line, f.code) for f in lint_file(p)]
        [(2, 'TPL206')]
    """
    codes = resolve_codes(select, ignore)
    findings, _ = _lint_one(Path(path), codes, Path(path).name)
    return findings


def _context_path(file: Path, roots: Sequence[Path]) -> str:
    """``file`` relative to the folder it was found under (its name if given alone)."""
    for root in roots:
        if root.is_dir():
            try:
                return file.relative_to(root).as_posix()
            except ValueError:
                continue
    return file.name


def _codes_for(file: Path, codes: Sequence[str], config: LintConfig | None) -> Sequence[str]:
    """``codes`` less what the configuration's per-file ignores turn off for ``file``."""
    if config is None or not config.per_file_ignores:
        return codes
    off = config.ignored_for(file)
    return [c for c in codes if c not in off] if off else codes


def _lint_one(
    path: Path, codes: Sequence[str], context_path: str
) -> tuple[list[Finding], int | Skipped]:
    try:
        text = read_source(path)
    except (UnicodeDecodeError, SyntaxError, LookupError) as e:
        found = [_syntax_finding(str(path), e)] if "TPL001" in codes else []
        return found, 0
    if isinstance(text, Skipped):
        return [], text
    findings = lint_source(text, str(path), codes=codes, context_path=context_path)
    return findings, text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def lint_paths(
    paths: Sequence[str | os.PathLike[str]],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    respect_gitignore: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
    config: LintConfig | None = None,
) -> LintResult:
    """Lint files and folders (``*.py`` under folders, .gitignore respected).

    Args:
        paths: files and folders; a file is linted whatever its extension.
        select: rule codes or prefixes to check (default: every rule).
        ignore: rule codes or prefixes not to check.
        respect_gitignore: skip what .gitignore files ignore.
        progress: called as ``progress(done, total, path)`` after each file.
        config: a project's ``[tool.torchplace.lint]`` (its selection, under ``select``
            and ``ignore``, and its per-file ignores).

    Raises:
        ValueError: a path does not exist (``LintPathError``) or a code names no rule.
    """
    codes = config.codes(select, ignore) if config else resolve_codes(select, ignore)
    files = list(iter_python_files(paths, respect_gitignore=respect_gitignore))
    result = LintResult()
    roots = [Path(p) for p in paths]
    for i, file in enumerate(files, 1):
        findings, lines = _lint_one(
            file, _codes_for(file, codes, config), _context_path(file, roots)
        )
        if isinstance(lines, Skipped):
            result.skipped.append(lines)
        else:
            result.files += 1
            result.lines += lines
            result.findings.extend(findings)
        if progress is not None:
            progress(i, len(files), str(file))
    result.findings.sort()
    return result
