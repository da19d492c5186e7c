"""What a process that a simulated script started runs to enter the parent's simulation
(:mod:`torchplace.sim.emulation._processes` points spawn children and joining Pythons here): the
simulation with the parent's options, then the child's own work, then the child's report
for the parent's process section.
"""

from __future__ import annotations

import atexit
import json
import multiprocessing.process
import multiprocessing.spawn
import os
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from torchplace.sim.emulation import _simulate

__all__ = ["join_simulation", "spawn_main"]


def _write_section(config: str, section: dict[str, Any]) -> None:
    path = Path(config).parent / f"process-{os.getpid()}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(section))
    os.replace(tmp, path)


def spawn_main(config: str, **kwds: Any) -> None:
    """Entry point of a spawned child: the parent's simulation, then multiprocessing's own
    ``spawn_main``, then this process's report for the parent."""
    options = json.loads(Path(config).read_text())
    section: dict[str, Any] = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "start_method": "spawn",
        "started": time.time(),
        "exit_code": None,
        "simulated": True,
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
        _write_section(config, section)
    sys.exit(code)


def join_simulation(config: str) -> None:
    """Enter the simulation that ``config`` describes in this process, until it exits (a
    Python started by the simulated script, which has just imported torch)."""
    options = json.loads(Path(config).read_text())
    section: dict[str, Any] = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": list(getattr(sys, "orig_argv", sys.argv)),
        "start_method": "subprocess",
        "started": time.time(),
        "exit_code": 0,
        "simulated": True,
    }
    _simulate._process_ends_with_simulation = True
    running = _simulate.simulate(**options)
    report = running.__enter__()
    failure: list[BaseException] = []
    real_exit, real_excepthook = sys.exit, sys.excepthook

    def exit(code: Any = None) -> NoReturn:
        section["exit_code"] = 0 if code is None else code if isinstance(code, int) else 1
        real_exit(code)

    def excepthook(kind: Any, value: Any, tb: Any) -> None:
        failure.append(value)
        section["exit_code"] = 1
        real_excepthook(kind, value, tb)

    def finish() -> None:
        sys.exit, sys.excepthook = real_exit, real_excepthook
        running.__exit__(None, None, None)
        if failure:
            report.error = _simulate._error_record(failure[0])
        report.exit_code = section["exit_code"]
        report.conclude()
        section["report"] = report.to_dict()
        _write_section(config, section)

    sys.exit, sys.excepthook = exit, excepthook
    atexit.register(finish)
