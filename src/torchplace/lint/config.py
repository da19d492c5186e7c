"""``[tool.torchplace.lint]`` in ``pyproject.toml``: which rules run, and where.

The keys follow ruff's, so a project configures both linters the same way:

.. code-block:: toml

    [tool.torchplace.lint]
    select = ["TPL1", "TPL2"]          # default: every rule that is on by default
    extend-select = ["TPL203"]         # add (opt-in rules need their full code)
    ignore = ["TPL104"]
    [tool.torchplace.lint.per-file-ignores]
    "tests/*" = ["TPL101", "TPL203"]   # globs relative to the pyproject.toml's folder
    "__init__.py" = ["TPL4"]           # a pattern without "/" also matches a file name
    "!src/*" = ["TPL302"]              # "!": files that do NOT match

The command line wins over the file: ``--select`` replaces ``select`` and
``extend-select``, ``--ignore`` adds to ``ignore``. Per-file ignores always apply.

Examples:
    >>> config = LintConfig(per_file_ignores=(("tests/*", ("TPL101",)),), root="/p")
    >>> config.ignored_for("/p/tests/test_a.py"), config.ignored_for("/p/train.py")
    (('TPL101',), ())
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchplace.lint.rules import UnknownRuleError, check_codes, resolve_codes

__all__ = ["ConfigError", "LintConfig", "find_config", "load_config"]

_KEYS = ("select", "extend-select", "ignore", "per-file-ignores")


class ConfigError(ValueError):
    """A ``[tool.torchplace.lint]`` table that cannot be used (the message says where)."""

    hint = "fix the [tool.torchplace.lint] table (see docs/lint.md), or pass --isolated"


@dataclass(frozen=True)
class LintConfig:
    """Rule selection from a project's ``pyproject.toml``.

    Attributes:
        select: the codes or prefixes to run (``None``: the rules on by default).
        extend_select: codes or prefixes added to ``select``.
        ignore: codes or prefixes not to run.
        per_file_ignores: (glob, codes) pairs; a glob starting with ``!`` applies to the
            files it does not match.
        root: the folder globs are relative to (the ``pyproject.toml``'s).
        source: the file the configuration came from, for messages.
    """

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    root: str = "."
    source: str | None = None

    def codes(
        self, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
    ) -> tuple[str, ...]:
        """The codes to run, the command line's ``select``/``ignore`` over the file's."""
        if select:
            chosen = list(select)
        elif self.select is not None or self.extend_select:
            chosen = [*(self.select if self.select is not None else ["TPL"]), *self.extend_select]
        else:
            chosen = []
        return resolve_codes(chosen or None, [*self.ignore, *(ignore or ())])

    def ignored_for(self, path: str | os.PathLike[str]) -> tuple[str, ...]:
        """The codes ``per-file-ignores`` turn off for a file (prefixes expanded)."""
        if not self.per_file_ignores:
            return ()
        absolute = Path(os.path.abspath(path))
        try:
            relative = absolute.relative_to(os.path.abspath(self.root)).as_posix()
        except ValueError:
            relative = absolute.as_posix()
        name = absolute.name
        codes: list[str] = []
        for pattern, rule_codes in self.per_file_ignores:
            negated = pattern.startswith("!")
            glob = pattern[1:] if negated else pattern
            matched = fnmatch.fnmatchcase(relative, glob) or (
                "/" not in glob and fnmatch.fnmatchcase(name, glob)
            )
            if matched != negated:
                codes.extend(rule_codes)
        if not codes:
            return ()
        kept = set(resolve_codes(["ALL"], codes))  # prefixes expand to opt-in rules too
        return tuple(c for c in resolve_codes(["ALL"]) if c not in kept)


def find_config(start: str | os.PathLike[str] = ".") -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` with a ``[tool.torchplace.lint]``
    table (a ``pyproject.toml`` without one is passed over, as ruff does)."""
    folder = Path(os.path.abspath(start))
    if folder.is_file():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file() and _table(path) is not None:
            return path
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from e


def _table(path: Path) -> dict[str, Any] | None:
    try:
        data = _read_toml(path)
    except (OSError, ConfigError):
        return None
    table = data.get("tool", {}).get("torchplace", {}).get("lint")
    return table if isinstance(table, dict) else None


def load_config(path: str | os.PathLike[str]) -> LintConfig:
    """Read ``[tool.torchplace.lint]`` from a ``pyproject.toml``.

    Raises:
        ConfigError: the file is not TOML, a key is unknown, a value has the wrong type
            or names no rule. The message names the file, the key and the value.
    """
    file = Path(path)
    try:
        data = _read_toml(file)
    except OSError as e:
        raise ConfigError(f"cannot read {file}: {e.strerror or e}") from e
    table = data.get("tool", {}).get("torchplace", {}).get("lint", {})
    where = f"{file} [tool.torchplace.lint]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table, not {type(table).__name__}")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {', '.join(map(repr, unknown))}; the keys are {', '.join(_KEYS)}"
        )

    def codes(key: str, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: {key} must be a list of rule codes, not {value!r}")
        try:
            check_codes(value, key)
        except UnknownRuleError as e:
            raise ConfigError(f"{where}: {e}") from e
        return tuple(value)

    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{where}: per-file-ignores must be a table of glob = [codes]")
    return LintConfig(
        select=codes("select", table["select"]) if "select" in table else None,
        extend_select=codes("extend-select", table.get("extend-select", [])),
        ignore=codes("ignore", table.get("ignore", [])),
        per_file_ignores=tuple(
            (pattern, codes(f"per-file-ignores {pattern!r}", value))
            for pattern, value in per_file.items()
        ),
        root=str(file.resolve().parent),
        source=str(file),
    )
