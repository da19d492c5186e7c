"""The child process of ``torchplace sim``: run one script under ``simulate()``.

``python -m torchplace.sim._child CONFIG`` reads a JSON config written by the parent,
runs the script (or module) as ``__main__`` with its own ``sys.argv``, and writes the
report as JSON to the path the config names. The parent survives whatever happens here,
including a torch build that aborts the process.
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import signal
import sys
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torchplace.sim import _values
from torchplace.sim.accounting._state import _OWN_DIR
from torchplace.sim.emulation import _simulate

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


class _Tail:
    """A stream that passes everything on and keeps the last line written (what a script
    printed before it exited with an error code: argparse's message, a 'usage:' line)."""

    def __init__(self, stream: Any, keep: list[str]) -> None:
        self._stream = stream
        self._keep = keep

    def write(self, text: str) -> int:
        lines = [line.strip() for line in str(text).splitlines()]
        lines = [line for line in lines if line]
        if lines:
            self._keep[:] = [lines[-1][:500]]
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _stopped_at(e: SystemExit, last: list[str]) -> dict[str, Any]:
    """Where a script that exited with an error code stopped, and what it said last."""
    record = _simulate._error_record(e)
    return {
        "file": record["file"],
        "line": record["line"],
        "last_output": last[0] if last else None,
    }


@contextlib.contextmanager
def _watch_process_group(report: Any) -> Iterator[None]:
    """Record in ``report.distributed`` whether the script starts a process group (a
    script that does not, run as N ranks, is N copies of a one-GPU job)."""
    report.distributed = False
    try:
        import torch.distributed as dist
    except ImportError:
        yield
        return
    if not dist.is_available():
        yield
        return
    init = dist.init_process_group

    def watched(*args: Any, **kwargs: Any) -> Any:
        report.distributed = True
        return init(*args, **kwargs)

    dist.init_process_group = watched
    try:
        yield
    finally:
        dist.init_process_group = init


class Terminated(BaseException):
    """The parent asked the simulated script to stop (SIGTERM, Ctrl-C or --timeout).

    A ``BaseException``, like ``KeyboardInterrupt``, so ``except Exception`` in the
    script does not swallow it."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated(
        f"the simulated script was stopped by torchplace sim (signal {signal.Signals(signum).name})"
    )


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    signal.signal(signal.SIGTERM, _terminate)
    _simulate._process_ends_with_simulation = True
    target: str = config["target"]
    os.environ.update(config.get("env") or {})  # what a launcher such as torchrun sets
    exit_code = 0
    stopped_at = None
    last: list[str] = []
    sys.stdout, sys.stderr = _Tail(sys.stdout, last), _Tail(sys.stderr, last)
    if config.get("plan_gpus"):
        from torchplace import catalog

        # the run must not stop at the representative GPU's capacity... it is the largest
        # of its class, so every other GPU of the class runs out at or before that point
        config["gpu"] = catalog.lookup(config["gpu"]).key
    report = None
    values, scout, decided = config.get("values", "real"), None, None
    if values == "auto":  # decide before paying for real values (torchplace.sim._values)
        values, scout, decided = _values.scout_first(config)
    stopped = False
    try:
        with (
            _simulate.simulate(
                config["gpu"],
                gpus=config["gpus"],
                memory=config["memory"],
                context_bytes=config["context_bytes"],
                values=values,
                host_memory_limit=config.get("host_memory_limit"),
                write_files=config.get("write_files", False),
                nodes=config.get("nodes", 1),
                network=config.get("network"),
            ) as report,
            _watch_process_group(report),
        ):
            if scout is not None:
                scout.watch(report.state)
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
                if exit_code:
                    stopped_at = _stopped_at(e, last)
            finally:
                if scout is not None:
                    scout.script_over()
                # the script is over; a second Ctrl-C must not cut its report short (the
                # parent kills a child that takes too long)
                for s in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(s, signal.SIG_IGN)
    except Exception as e:
        _print_traceback(e)
        exit_code = 1
    except KeyboardInterrupt as e:  # Ctrl-C reached the script, which did not handle it
        _print_traceback(e)
        exit_code, stopped = 128 + signal.SIGINT, True
        if report is not None:
            report.error = {
                **_simulate._error_record(e),
                "message": "interrupted (Ctrl-C): the report covers the run until then",
            }
    except Terminated as e:
        print(f"torchplace sim: {e}", file=sys.stderr)
        exit_code, stopped = 128 + signal.SIGTERM, True
    if scout is not None:
        scout.finish(stopped)  # (exits here unless it is the run)
    sys.stdout.flush()
    if report is not None and config.get("plan_gpus") and report.state is not None:
        from torchplace import catalog
        from torchplace.sim import plan

        specs = [catalog.lookup(key) for key in config["plan_gpus"]]
        results = plan.replay_all(
            report.state, specs, capacity=config["memory"], context_bytes=config["context_bytes"]
        )
        report.plan = {
            "gpus": [r.to_dict() for r in results],
            "runs": [{"gpu": config["gpu"], "class": config["plan_gpus"]}],
        }
    if report is not None:
        _values.explain(report, scout, decided)
        report.exit_code = exit_code
        report.stopped_at = stopped_at
        report.script = target
        report.conclude()
        if config.get("timeline"):  # torchplace sim --html / --png
            report.add_timelines()
        if config.get("snapshot") and report.state is not None:  # --snapshot
            from torchplace.sim.snapshot import dump, snapshot

            dump(snapshot(report.state), config["snapshot"])
        _write_atomic(config["report"], report.to_dict())
    return exit_code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
