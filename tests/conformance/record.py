"""Run a script as ``__main__`` and record what a GPU check compares: the hook both sides run.

``python record.py SCRIPT [ARGS...]`` (plainly on a real GPU) and
``torchplace sim ... record.py SCRIPT [ARGS...]`` (simulated) run SCRIPT unchanged, as
``python SCRIPT ARGS`` would (its ``sys.argv``, ``sys.path[0]`` and ``__main__``), and write
to the JSON file named by ``$TORCHPLACE_RECORD``:

- ``steps``: after every ``optimizer.step()`` (torch's global step post-hook) and once at
  the end (``"at": "end"``, also when the script raised), the CUDA memory the script would
  read: ``memory_allocated``, ``max_memory_allocated`` and ``memory_reserved`` of each
  device it initialised;
- ``error``: the uncaught exception (type, message, and the line of SCRIPT it passed
  through last, wherever it was raised), or None; ``exit``: the code Python exits with;
- ``stdout``: what the script printed.

Under torchrun each rank records; rank 0 to that file, rank N to ``<file>.rankN``.

The exception then propagates as it would have, so the exit code and traceback are the
script's own. Nothing here changes what the script computes or allocates.
"""

from __future__ import annotations

import io
import json
import os
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any

__all__ = ["error_of", "main"]

ENV = "TORCHPLACE_RECORD"


class _Tee(io.TextIOBase):
    """The script's stdout: passed on, and kept."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.kept = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.kept.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return int(self.stream.fileno())

    def isatty(self) -> bool:
        return bool(self.stream.isatty())


def _memory(at: str) -> dict[str, Any]:
    torch = sys.modules.get("torch")
    devices: dict[str, dict[str, int]] = {}
    if torch is not None and torch.cuda.is_initialized():
        for i in range(torch.cuda.device_count()):
            devices[str(i)] = {
                "allocated": torch.cuda.memory_allocated(i),
                "max_allocated": torch.cuda.max_memory_allocated(i),
                "reserved": torch.cuda.memory_reserved(i),
            }
    return {"at": at, "devices": devices}


def error_of(e: BaseException, script: str) -> dict[str, Any]:
    """An exception as the check compares it: type, message, and the last line of
    ``script`` its traceback passes through (None when it never did)."""
    line = None
    for frame in traceback.extract_tb(e.__traceback__):
        if os.path.realpath(frame.filename) == os.path.realpath(script):
            line = frame.lineno
    return {"type": type(e).__name__, "message": str(e), "line": line}


def _exit_code(e: SystemExit) -> int:
    return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)


def main(argv: list[str]) -> None:
    script, out = argv[0], os.environ[ENV]
    if os.environ.get("RANK", "0") != "0":  # torchrun's other ranks: rank 0 is compared
        out = f"{out}.rank{os.environ['RANK']}"
    record: dict[str, Any] = {"script": script, "steps": [], "error": None, "exit": 0}
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    tee = sys.stdout = _Tee(sys.stdout)
    if "torch" not in sys.modules:
        import torch  # noqa: F401  (the hook below needs torch.optim; the script imports it)
    from torch.optim.optimizer import register_optimizer_step_post_hook

    count = [0]

    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        count[0] += 1
        record["steps"].append(_memory(f"step {count[0]}"))

    handle = register_optimizer_step_post_hook(after_step)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        record["exit"] = _exit_code(e)
        raise
    except BaseException as e:
        record["error"], record["exit"] = error_of(e, script), 1
        raise
    finally:
        handle.remove()
        record["steps"].append(_memory("end"))
        record["stdout"] = tee.kept.getvalue()
        sys.stdout = tee.stream
        tmp = Path(out).with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, out)


if __name__ == "__main__":
    main(sys.argv[1:])
