"""Processes a simulated script starts: ``multiprocessing`` and ``torch.multiprocessing``.

- *spawn* (and *forkserver*) children start a fresh Python, which would know nothing of
  the simulation: their command line is changed to enter the same simulation (same GPUs,
  values and options) before ``multiprocessing`` runs the target, and each child writes
  its own report, which the parent's report lists as a process section. PyTorch's DDP
  tutorials start one such process per GPU with ``torch.multiprocessing.spawn``.
- *fork* children inherit the simulation. As on CUDA, a child forked after the parent
  used CUDA cannot use it ("Cannot re-initialize CUDA in forked subprocess"), and
  ``torch.cuda._is_in_bad_fork()`` says so (DataLoader workers rely on it).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing.process
import multiprocessing.spawn
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torchplace.sim._state import SimState

__all__ = ["ProcessSections", "patched_processes", "spawn_main"]

_state: SimState | None = None  # the simulation of this process, for the fork hook
_hooked = False


def _after_fork_in_child() -> None:
    if _state is not None and _state.initialized:
        _state.bad_fork = True


class ProcessSections:
    """Where children write their reports, and the options they simulate with."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="torchplace-sim-processes-"))
        self.config = self.dir / "config.json"
        self.config.write_text(json.dumps(options))

    def collect(self) -> list[dict[str, Any]]:
        sections = []
        for path in sorted(self.dir.glob("process-*.json")):
            with contextlib.suppress(OSError, ValueError):
                sections.append(json.loads(path.read_text()))
        return sorted(sections, key=lambda s: s.get("started", 0))


@contextlib.contextmanager
def patched_processes(state: SimState, options: dict[str, Any]) -> Iterator[ProcessSections]:
    """Make children started with spawn enter the simulation; mark forked ones."""
    global _state, _hooked
    sections = ProcessSections(options)
    real_command_line = multiprocessing.spawn.get_command_line

    def get_command_line(**kwds: Any) -> list[str]:
        command = real_command_line(**kwds)
        if "-c" not in command:  # a frozen executable: leave it
            return command
        i = command.index("-c")
        args = ", ".join(f"{k}={v!r}" for k, v in kwds.items())
        command[i + 1] = (
            "from torchplace.sim._processes import spawn_main; "
            f"spawn_main({str(sections.config)!r}, {args})"
        )
        return command

    if not _hooked:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _hooked = True
    saved_state, _state = _state, state
    multiprocessing.spawn.get_command_line = get_command_line
    try:
        yield sections
    finally:
        multiprocessing.spawn.get_command_line = real_command_line
        _state = saved_state


def spawn_main(config: str, **kwds: Any) -> None:
    """Entry point of a spawned child: the parent's simulation, then multiprocessing's own
    ``spawn_main``, then this process's report for the parent."""
    import time

    from torchplace.sim import _simulate

    options = json.loads(Path(config).read_text())
    section: dict[str, Any] = {
        "pid": os.getpid(),
        "start_method": "spawn",
        "started": time.time(),
        "exit_code": None,
    }
    code: Any = 0
    try:
        with _simulate.simulate(**options) as report:
            try:
                multiprocessing.spawn.spawn_main(**kwds)
            except SystemExit as e:
                code = e.code
    finally:
        current = multiprocessing.process.current_process()
        section["name"] = current.name
        section["exit_code"] = code if isinstance(code, int) else 1
        if "report" in locals():
            section["report"] = report.to_dict()
        path = Path(config).parent / f"process-{os.getpid()}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(section))
        os.replace(tmp, path)
    sys.exit(code)
