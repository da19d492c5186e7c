"""Which files ``torchplace lint`` reads: Python files under the paths given, as git sees them.

A folder is walked for ``*.py`` files, skipping what ``.gitignore`` files ignore (every
``.gitignore`` from the repository root down, and ``.git/info/exclude``, with git's own
rules: the deepest file wins, a ``!`` pattern re-includes, an ignored folder is not
entered), virtual environments (a folder with ``pyvenv.cfg``), and the folders other
Python linters skip by default (``.git``, ``.venv``, ``venv``, ``node_modules``,
``site-packages``, ``build``, ``dist``, caches); symbolic links to folders are not
followed. A file named on the command line is always read, whatever its extension.

Pattern matching follows git's rules through the ``pathspec`` package (the library
black and many other tools use for .gitignore).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pathspec

__all__ = ["DEFAULT_EXCLUDES", "LintPathError", "iter_python_files"]

#: Folder names never entered (ruff's defaults, plus caches).
DEFAULT_EXCLUDES = frozenset(
    [
        ".bzr",
        ".direnv",
        ".eggs",
        ".git",
        ".git-rewrite",
        ".hg",
        ".ipynb_checkpoints",
        ".mypy_cache",
        ".nox",
        ".pants.d",
        ".pyenv",
        ".pytest_cache",
        ".pytype",
        ".ruff_cache",
        ".svn",
        ".tox",
        ".venv",
        ".vscode",
        "__pycache__",
        "__pypackages__",
        "_build",
        "buck-out",
        "build",
        "dist",
        "node_modules",
        "site-packages",
        "venv",
    ]
)


class LintPathError(ValueError):
    """A path given to the linter does not exist."""

    hint = "check the path, or run `torchplace lint .` for the current folder"


def _repo_root(path: Path) -> Path | None:
    for parent in (path, *path.parents):
        if (parent / ".git").exists():
            return parent
    return None


def _read_spec(path: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


class _Ignores:
    """The .gitignore files that apply to one walk, deepest first when asked."""

    def __init__(self, top: Path) -> None:
        self.specs: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
        root = _repo_root(top)
        if root is None:
            return
        exclude = _read_spec(root / ".git" / "info" / "exclude")
        if exclude is not None:
            self.specs.append((root, exclude))
        chain = [top, *top.parents]
        for folder in reversed(chain[: chain.index(root) + 1]):
            if folder != top:
                self.add(folder)

    def add(self, folder: Path) -> None:
        spec = _read_spec(folder / ".gitignore")
        if spec is not None:
            self.specs.append((folder, spec))

    def enter(self, folder: Path) -> None:
        """Start on ``folder``: forget the specs of folders that do not contain it."""
        self.specs = [(b, s) for b, s in self.specs if folder == b or folder.is_relative_to(b)]
        self.add(folder)

    def ignored(self, path: Path, is_dir: bool) -> bool:
        for base, spec in reversed(self.specs):
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            result = spec.check_file(rel + "/" if is_dir else rel)
            if result.include is not None:
                return bool(result.include)
        return False


def _walk(top: Path, respect_gitignore: bool) -> Iterator[Path]:
    """Python files under ``top`` (paths as given), ignore rules checked on absolute paths."""
    abs_top = top.resolve()
    ignores = _Ignores(abs_top) if respect_gitignore else None
    stack: list[tuple[Path, Path]] = [(top, abs_top)]
    while stack:
        folder, abs_folder = stack.pop()
        if ignores is not None:
            ignores.enter(abs_folder)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        dirs: list[tuple[Path, Path]] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)  # no loops through links
                is_file = not is_dir and entry.is_file()
            except OSError:
                continue
            if is_dir:
                path = Path(entry.path)
                if entry.name in DEFAULT_EXCLUDES or (path / "pyvenv.cfg").exists():
                    continue
                abs_path = abs_folder / entry.name
                if ignores is not None and ignores.ignored(abs_path, True):
                    continue
                dirs.append((path, abs_path))
            elif is_file and entry.name.endswith(".py"):
                if ignores is not None and ignores.ignored(abs_folder / entry.name, False):
                    continue
                yield Path(entry.path)
        stack.extend(reversed(dirs))


def iter_python_files(
    paths: Sequence[str | os.PathLike[str]], *, respect_gitignore: bool = True
) -> Iterator[Path]:
    """The files to lint under ``paths``, each once, in a stable order.

    Raises:
        LintPathError: a path does not exist (checked for all paths before any is read).
    """
    given = [Path(p) for p in paths]
    missing = [str(p) for p in given if not p.exists()]
    if missing:
        raise LintPathError(
            f"no such file or folder: {', '.join(missing)} (working folder {os.getcwd()})."
        )
    seen: set[Path] = set()
    for path in given:
        found = [path] if not path.is_dir() else _walk(path, respect_gitignore)
        for file in found:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                yield file
