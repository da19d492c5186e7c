"""What a lint check reports: a :class:`Finding` at a place in a file, and its :class:`Fix`.

Positions are those an editor shows: lines and columns start at 1, and a column counts
characters (Unicode code points), not bytes. A fix is a list of :class:`Edit` objects,
each replacing a span of the source text (character offsets from its start).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Edit", "Finding", "Fix"]


@dataclass(frozen=True)
class Edit:
    """Replace ``source[start:end]`` with ``text`` (``start == end`` inserts).

    Examples:
        >>> Edit(4, 4, ".detach()").apply("loss + 1")
        'loss.detach() + 1'
    """

    start: int
    end: int
    text: str

    def apply(self, source: str) -> str:
        """Return ``source`` with this one edit made."""
        return source[: self.start] + self.text + source[self.end :]


@dataclass(frozen=True)
class Fix:
    """The edits that resolve a finding without changing what the program computes."""

    description: str
    edits: tuple[Edit, ...]


@dataclass(frozen=True, order=True)
class Finding:
    """One problem found at one place.

    Attributes:
        path: the file, as it was given or found (``"<string>"`` for source text).
        line: 1-based line of the start of the offending code.
        col: 1-based column (characters) of the start.
        code: the rule code, e.g. ``"TPL101"``.
        message: one line: what is wrong, why it matters on a GPU, and the fix.
        end_line: 1-based line of the end of the offending code.
        end_col: 1-based column just past its end.
        hint: how to fix it, as a short imperative sentence.
        fix: the automatic fix ``torchplace lint --fix`` applies, or ``None``.
    """

    path: str
    line: int
    col: int
    code: str
    message: str = field(compare=False)
    end_line: int = field(default=0, compare=False)
    end_col: int = field(default=0, compare=False)
    hint: str = field(default="", compare=False)
    fix: Fix | None = field(default=None, compare=False, repr=False)

    @property
    def fixable(self) -> bool:
        """Whether ``--fix`` can resolve this finding."""
        return self.fix is not None

    def format(self) -> str:
        """The compiler-style line ``path:line:col: CODE message``.

        Examples:
            >>> Finding("train.py", 12, 9, "TPL101", "host sync every step").format()
            'train.py:12:9: TPL101 host sync every step'
        """
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (see ``torchplace/data/lint-report.schema.json``)."""
        return {
            "path": self.path,
            "line": self.line,
            "column": self.col,
            "end_line": self.end_line or self.line,
            "end_column": self.end_col or self.col,
            "code": self.code,
            "message": self.message,
            "hint": self.hint,
            "fixable": self.fixable,
        }
