"""What a command line names to run: a script file, or a module as ``python -m`` finds it.

Shared by ``torchplace sim`` and ``torchplace run``: both check the target before anything
starts, and say what to type when it is not a script (a folder, ``python``, a module).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from pathlib import Path

__all__ = ["UsageError", "check_module", "check_script", "module_found", "not_a_script"]


class UsageError(ValueError):
    """A command line that names nothing runnable; ``hint`` says what to type instead."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def module_found(name: str, cwd: str | None = None) -> bool:
    """Whether ``python -m NAME``, run in ``cwd``, would find the module.

    ``python -m`` puts the current folder first on ``sys.path``; so does this. Nothing is
    imported: the module's packages are looked up on the file system (and by the import
    hooks installed packages register, such as editable installs).

    Examples:
        >>> module_found("json.tool"), module_found("json.no_such_module")
        (True, False)
    """
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return False
    if len(parts) == 1 and name in sys.builtin_module_names:
        return True
    search: list[str] | None = [cwd or os.getcwd(), *sys.path]
    for i in range(len(parts)):
        fullname = ".".join(parts[: i + 1])
        spec = None
        if i == 0:
            spec = importlib.machinery.PathFinder.find_spec(fullname, search)
            for finder in sys.meta_path if spec is None else ():
                find = getattr(finder, "find_spec", None)
                if find is not None and finder is not importlib.machinery.PathFinder:
                    try:
                        spec = find(fullname, None)
                    except Exception:  # a third-party finder's own failure: not found by it
                        spec = None
                    if spec is not None:
                        break
        elif search:
            spec = importlib.machinery.PathFinder.find_spec(fullname, search)
        if spec is None:
            return False
        search = list(spec.submodule_search_locations or [])
        if i < len(parts) - 1 and not search:
            return False  # a module, not a package: it has no submodules
    return True


def check_module(name: str, command: str) -> None:
    """Raise :class:`UsageError` unless ``python -m NAME`` would find the module here."""
    if not module_found(name):
        raise UsageError(
            f"no module named {name!r} can be imported here (python -m {name} would fail)",
            "check the name, install the package that has it (pip install -e .), run from "
            f"the folder that holds it, or drop -m to run a script file: {command} path/to.py",
        )


def check_script(target: str, command: str, args: list[str] | None = None) -> None:
    """Raise :class:`UsageError` unless ``target`` is a script file (:func:`not_a_script`)."""
    problem = not_a_script(target, command, args)
    if problem is not None:
        raise UsageError(*problem)


def not_a_script(
    target: str, command: str, args: list[str] | None = None
) -> tuple[str, str] | None:
    """Why ``target`` is not a script file ``command`` can run, and what to type instead;
    None when it is one. ``command`` is how the user started (``torchplace sim``), ``args``
    what followed ``target``."""
    path = Path(target)
    if path.is_file():
        return None
    args = args or []
    if path.is_dir():
        if (path / "__main__.py").is_file() and module_found(path.name, str(path.parent)):
            hint = f"to run the package, give its module: {command} -m {path.name}"
        else:
            hint = (
                f"give the script file inside it ({command} {path / 'train.py'}), or "
                "-m package.module for a module of a package"
            )
        return f"{target} is a folder, not a script", hint
    if path.name.startswith("python") and not path.suffix:
        rest = " ".join(args) if args else "script.py"
        return (
            f"no such script: {target!r} — {command} runs Python itself",
            f"leave out {target!r}: {command} {rest}",
        )
    if module_found(target.removesuffix(".py")) and not target.endswith(".py"):
        return f"no such script: {target!r}", f"to run the module {target}: {command} -m {target}"
    return (
        f"no such script: {target} ({path.absolute()} does not exist)",
        "give the path of a Python file, or -m package.module to run a module",
    )
