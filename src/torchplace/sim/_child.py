"""The child process of ``torchplace sim``: run one script under ``simulate()``.

``python -m torchplace.sim._child CONFIG`` reads a JSON config written by the parent,
runs the script (or module) as ``__main__`` with its own ``sys.argv``, and writes the
report as JSON to the path the config names. The parent survives whatever happens here,
including a torch build that aborts the process.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from torchplace.sim import simulate
from torchplace.sim._state import _OWN_DIR

__all__ = ["main"]


def _exit_code(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_traceback(e: BaseException) -> None:
    """Python's own traceback, less torchplace's frames (the script sees plain torch)."""
    tb = traceback.TracebackException.from_exception(e)
    tb.stack = traceback.StackSummary.from_list(
        [f for f in tb.stack if not f.filename.startswith(_OWN_DIR)]
    )
    print("".join(tb.format()), end="", file=sys.stderr)


def _write_atomic(path: str, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    target: str = config["target"]
    exit_code = 0
    report = None
    try:
        with simulate(
            config["gpu"],
            gpus=config["gpus"],
            memory=config["memory"],
            context_bytes=config["context_bytes"],
        ) as report:
            try:
                if config["module"]:
                    sys.argv = [target, *config["args"]]
                    runpy.run_module(target, run_name="__main__", alter_sys=True)
                else:
                    sys.argv = [target, *config["args"]]
                    sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
                    runpy.run_path(target, run_name="__main__")
            except SystemExit as e:
                exit_code = _exit_code(e.code)
    except Exception as e:
        _print_traceback(e)
        exit_code = 1
    except KeyboardInterrupt:
        exit_code = 130
    sys.stdout.flush()
    if report is not None:
        report.exit_code = exit_code
        report.script = target
        _write_atomic(config["report"], report.to_dict())
    return exit_code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
