"""Processes a simulated script starts: ``multiprocessing``, ``torch.multiprocessing`` and
other Python processes (``subprocess.run([sys.executable, "train.py"])``, launchers).

- *spawn* (and *forkserver*) children of ``multiprocessing`` start a fresh Python, which
  would know nothing of the simulation: their command line is changed to enter the same
  simulation (same GPUs, values and options) before ``multiprocessing`` runs the target.
  PyTorch's DDP tutorials start one such process per GPU with ``torch.multiprocessing.spawn``.
- Any other Python process the script starts, directly or through a launcher (a shell
  script, ``accelerate launch``, ``torchrun``), joins the simulation when it imports torch:
  while a simulation runs, ``PYTHONPATH`` names a folder whose ``sitecustomize`` module
  installs an import hook (:data:`_SITECUSTOMIZE`), and ``TORCHPLACE_SIM_PROCESSES`` names
  the simulation's options. A child that never imports torch costs nothing more than that
  small module. Python run with ``-I``, ``-E`` or ``-S`` skips ``sitecustomize``, and a
  Python without torchplace cannot join: the report lists such children as not simulated,
  and so are non-Python programs (they see no GPU).
- Each such child writes its own report, which the parent's report lists as a process
  section (:class:`ProcessSections`); a child's children report to the same place.
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
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torchplace.sim.accounting._state import SimState

__all__ = ["ENV", "ProcessSections", "patched_processes"]

#: the environment variable that names a running simulation's options for its children
ENV = "TORCHPLACE_SIM_PROCESSES"

_state: SimState | None = None  # the simulation of this process, for the fork hook
_hooked = False

# Imported by every Python process the simulated script starts (it is on their
# PYTHONPATH): so it imports nothing but os and sys until torch is imported.
_SITECUSTOMIZE = '''\
"""Written by torchplace sim: this Python joins the simulation when it imports torch."""
import os as _os
import sys as _sys


def _torchplace_sim_hook():
    here = _os.path.dirname(_os.path.abspath(__file__))
    while here in _sys.path:  # not on the script's own sys.path
        _sys.path.remove(here)
    _run_next_sitecustomize(here)
    config = _os.environ.get("TORCHPLACE_SIM_PROCESSES")
    argv = " ".join(getattr(_sys, "orig_argv", []))
    if not config or "spawn_main(" in argv or "multiprocessing" in argv:
        return  # multiprocessing's children enter the simulation their own way
    if "torch" in _sys.modules:
        return _join(config)
    _sys.meta_path.insert(0, _TorchImported(config))
    import atexit

    atexit.register(_report_unused, config)


def _run_next_sitecustomize(here):
    """A sitecustomize that this one hides (a distribution's, a user's) still runs."""
    import importlib.machinery
    import importlib.util

    path = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


class _TorchImported:
    """A meta path finder that waits for ``import torch``, then joins the simulation."""

    def __init__(self, config):
        self.config = config

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        _sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec("torch")
        loader = getattr(spec, "loader", None)
        if loader is None:
            return spec
        run = loader.exec_module
        config = self.config

        def exec_module(module):
            run(module)
            del loader.exec_module
            _join(config)

        loader.exec_module = exec_module
        return spec


def _join(config):
    global _joined
    _joined = True
    try:
        from torchplace.sim.emulation._process_child import join_simulation
    except Exception as e:  # a Python without torchplace: it cannot join
        _write(config, {"simulated": False, "reason": "not simulated: %s cannot import "
                        "torchplace (%s); it saw no GPU" % (_sys.executable, e)})
        return
    join_simulation(config)


def _report_unused(config):
    if not _joined:
        _write(config, {"simulated": False, "reason": "no torch: nothing to simulate"})


def _write(config, section):
    import json
    import time

    section = {"pid": _os.getpid(), "ppid": _os.getppid(), "argv": list(_sys.orig_argv),
               "start_method": "subprocess", "started": time.time(), **section}
    path = _os.path.join(_os.path.dirname(config), "process-%d.json" % _os.getpid())
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(section, f)
        _os.replace(path + ".tmp", path)
    except OSError:
        pass


_joined = False
_torchplace_sim_hook()
'''


def _after_fork_in_child() -> None:
    if _state is not None and _state.initialized:
        _state.bad_fork = True


class ProcessSections:
    """Where children write their reports, and the options they simulate with.

    The simulation that starts first owns the folder (and removes it when it ends); a
    simulation inside a child (a spawned process, a Python started by the script) writes
    its children's sections into the same folder, for the first to list.
    """

    def __init__(self, options: dict[str, Any]) -> None:
        inherited = os.environ.get(ENV)
        self.owner = not (inherited and os.path.isfile(inherited))
        if self.owner:
            self.dir = Path(tempfile.mkdtemp(prefix="torchplace-sim-processes-"))
            self.config = self.dir / "config.json"
            self.config.write_text(json.dumps(options))
            (self.dir / "hook").mkdir()
            (self.dir / "hook" / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        else:
            self.config = Path(str(inherited))
            self.dir = self.config.parent
        # what this process started with subprocess, and when
        self.launched: list[tuple[subprocess.Popen[Any], float]] = []

    def collect(self) -> list[dict[str, Any]]:
        """Every child's section (none in a simulation that does not own the folder: the
        first simulation lists them all), and the programs this process started that
        wrote none (not Python, or a Python that could not join)."""
        if not self.owner:
            return []
        sections = []
        for path in sorted(self.dir.glob("process-*.json")):
            with contextlib.suppress(OSError, ValueError):
                sections.append(json.loads(path.read_text()))
        reported = {s.get("pid"): s for s in sections}
        for child, started in self.launched:
            section = reported.get(child.pid)
            if section is not None:
                if child.returncode is not None:  # what its parent saw is the truth
                    section["exit_code"] = _exit_code(child.returncode)
                continue
            args = child.args
            sections.append(
                {
                    "pid": child.pid,
                    "argv": [str(a) for a in args] if isinstance(args, (list, tuple)) else args,
                    "start_method": "subprocess",
                    "started": started,
                    "exit_code": None if child.returncode is None else _exit_code(child.returncode),
                    "simulated": False,
                    "reason": "not simulated: not Python (or Python run with -I, -E or -S); "
                    "it saw no GPU",
                }
            )
        return sorted(sections, key=lambda s: s.get("started", 0))

    def close(self) -> None:
        if self.owner:
            shutil.rmtree(self.dir, ignore_errors=True)


def _exit_code(returncode: int) -> int:
    return returncode if returncode >= 0 else 128 - returncode


@contextlib.contextmanager
def patched_processes(state: SimState, options: dict[str, Any]) -> Iterator[ProcessSections]:
    """Make children started with spawn enter the simulation, Python children join it when
    they import torch; mark forked ones."""
    global _state, _hooked
    sections = ProcessSections(options)
    real_command_line = multiprocessing.spawn.get_command_line
    real_popen_init = subprocess.Popen.__init__

    def get_command_line(**kwds: Any) -> list[str]:
        command = real_command_line(**kwds)
        if "-c" not in command:  # a frozen executable: leave it
            return command
        i = command.index("-c")
        args = ", ".join(f"{k}={v!r}" for k, v in kwds.items())
        command[i + 1] = (
            "from torchplace.sim.emulation._process_child import spawn_main; "
            f"spawn_main({str(sections.config)!r}, {args})"
        )
        return command

    def popen_init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        real_popen_init(self, *args, **kwargs)
        sections.launched.append((self, time.time()))

    if not _hooked:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _hooked = True
    saved_state, _state = _state, state
    saved_env = {k: os.environ.get(k) for k in (ENV, "PYTHONPATH")}
    if sections.owner:
        os.environ[ENV] = str(sections.config)
        hook = str(sections.dir / "hook")
        path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = hook + (os.pathsep + path if path else "")
    multiprocessing.spawn.get_command_line = get_command_line
    subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
    try:
        yield sections
    finally:
        multiprocessing.spawn.get_command_line = real_command_line
        subprocess.Popen.__init__ = real_popen_init  # type: ignore[method-assign]
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _state = saved_state
        sections.close()
