"""The command line's argument parser: torchplace's options in full, a script's untouched.

argparse matches an option by any unambiguous prefix (``--n`` for ``--nnodes``) and reads
options wherever they appear, so ``torchplace sim train.py --n 5`` failed ("ambiguous
option") and ``train.py -- --x`` lost its ``--``. :class:`CommandParser` matches options
only as written in full, and for a command that runs a script (a positional argument with
``nargs=argparse.REMAINDER`` after the script's name, or an option with that ``nargs``,
such as ``-m MODULE``) it splits the command line before argparse reads it: everything
from the script's name (or from ``-m``) on belongs to the script, as ``python`` itself
does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["CommandParser"]


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` for the ``torchplace`` commands (see the module docstring).

    Examples:
        >>> p = CommandParser(prog="sim")
        >>> _ = p.add_argument("--nnodes", type=int, default=1)
        >>> _ = p.add_argument("script")
        >>> _ = p.add_argument("args", nargs=argparse.REMAINDER)
        >>> p.parse_args(["--nnodes", "2", "train.py", "--n", "5", "--", "--nnodes"])
        Namespace(nnodes=2, script='train.py', args=['--n', '5', '--', '--nnodes'])
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        argv = list(sys.argv[1:] if args is None else args)
        rest = self._remainder_positional()
        found = _script_start(argv, self._option_string_actions) if rest is not None else None
        if found is None:
            return super().parse_known_args(argv, namespace)
        index, option, script = found
        if option is not None:  # -m MODULE ...: the option takes the rest
            tail = argv[index + 1 :]
            if script is not None:  # -mMODULE, written together
                tail = [script, *tail]
            if not tail:
                self.error(f"argument {option.option_strings[0]}: expected a module name")
            ns, extras = super().parse_known_args(argv[:index], namespace)
            setattr(ns, option.dest, tail)
            return ns, extras
        head = argv[:index]
        if script is None:  # "--" and nothing after it
            return super().parse_known_args(head, namespace)
        tail = argv[index + 1 :]
        if argv[index] == "--":
            tail = tail[1:]
        # the script's name alone after the options (behind "--" if it starts with "-"),
        # so that argparse checks and stores it; what follows it is set here, untouched
        shown = ["--", script] if script.startswith("-") else [script]
        assert rest is not None
        ns, extras = super().parse_known_args(head + shown, namespace)
        setattr(ns, rest.dest, tail)
        return ns, extras

    def _remainder_positional(self) -> argparse.Action | None:
        """The positional argument that takes what follows the script, if this command
        runs one."""
        for action in self._actions:
            if not action.option_strings and action.nargs == argparse.REMAINDER:
                return action
        return None


def _script_start(
    argv: list[str], options: dict[str, argparse.Action]
) -> tuple[int, argparse.Action | None, str | None] | None:
    """Where the script's part of ``argv`` begins: ``(index, None, script)`` at the
    script's name (or at ``--``, the name after it), ``(index, option, value)`` at an
    option that takes all that follows (``-m``; ``value`` if written as ``-mMODULE``), or
    None when there is no script. Only options written in full count; an unknown one is
    left for argparse to report."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return i, None, argv[i + 1] if i + 1 < len(argv) else None
        if not token.startswith("-") or token == "-":
            return i, None, token
        attached: str | None = None
        action = options.get(token)
        if action is None and token.startswith("--") and "=" in token:
            name, _, attached = token.partition("=")
            action = options.get(name)
        elif action is None and not token.startswith("--") and len(token) > 2:
            action = options.get(token[:2])  # -mMODULE, -n5
            attached = token[2:]
        if action is None:
            i += 1
            continue
        if action.nargs == argparse.REMAINDER:
            return i, action, attached
        i += 1 if attached is not None else 1 + _values_taken(action, argv[i + 1 :])
    return None


def _values_taken(action: argparse.Action, following: list[str]) -> int:
    """How many of the ``following`` arguments an option takes as its values, as argparse
    decides it (values do not start with "-")."""
    nargs = action.nargs
    if nargs is None:
        return 1
    if isinstance(nargs, int):
        return nargs
    values = 0
    for token in following:
        if token.startswith("-") and token != "-":
            break
        values += 1
    if nargs == argparse.OPTIONAL:
        return min(values, 1)
    return values  # "*" and "+"
