"""The ``torchplace`` command line: parse, call the library, render.

Every subcommand lives in its own module under ``torchplace._cli`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``. They are registered here, in one
place, and only the module of the subcommand being run is imported, so ``--help`` and
each command start fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence

__all__ = ["error", "main"]

# name -> (module, one-line help); the order is the order shown by --help
_COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("torchplace._cli.info", "what this machine has: devices, memory, torch build"),
    "sim": ("torchplace._cli.sim", "run a script on simulated GPUs (no GPU needed)"),
    "bench": ("torchplace._cli.bench", "honest CPU-vs-accelerator timing and roofline"),
    "run": ("torchplace._cli.run", "launch a script with torchrun (DDP), one process per device"),
    "lint": ("torchplace._cli.lint", "find device mistakes in source code before anything runs"),
    "demo": ("torchplace._cli.demo", "train the built-in digits example on the best device"),
}


def _build_parser(command: str | None) -> argparse.ArgumentParser:
    from torchplace import __version__
    from torchplace._cli._parser import CommandParser

    # (its subcommands' parsers are CommandParsers too: add_subparsers makes its own type)
    parser = CommandParser(prog="torchplace", description="The PyTorch device toolkit.")
    parser.add_argument("--version", action="version", version=f"torchplace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in _COMMANDS.items():
        if name != command:
            sub.add_parser(name, help=help_text)
            continue
        module = importlib.import_module(module_name)
        sp = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.add_arguments(sp)
        sp.set_defaults(_run=module.run)
    return parser


def error(message: str, hint: str | None = None) -> int:
    """Print ``error: ...`` (and ``hint: ...``) to stderr and return exit code 2."""
    print(f"error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the torchplace command line and return its exit code."""
    try:
        code = _main(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # here, where a closed pipe can still be handled
        return code
    except BrokenPipeError:
        # the reader went away (torchplace info --json | head): stop quietly, as a Unix
        # tool does, with the exit code of a process ended by SIGPIPE
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _main(argv: list[str]) -> int:
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = _build_parser(command if command in _COMMANDS else None)
    args = parser.parse_args(argv)
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 0
    try:
        return int(args._run(args))
    except (ValueError, RuntimeError) as e:
        return error(str(e), getattr(e, "hint", None))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
