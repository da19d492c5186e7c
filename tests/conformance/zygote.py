"""Run ``torchplace sim`` commands in processes forked from one that has imported torch.

Starting Python and importing torch is most of what a conformance case costs. The zygote
(``python zygote.py``) imports torch and torchplace once, then reads one JSON request per
line on stdin — ``{"argv": [...], "env": {...}, "cwd": ..., "timeout": s}`` — and answers
each with one line ``{"rc": ..., "stdout": ..., "stderr": ...}``. Each command runs in a
process forked from the zygote, through the CLI's own ``main``; the CLI's child process
(``python -m torchplace.sim._child``) is forked from the command's process instead of
started afresh, and runs ``torchplace.sim._child.main`` as that module would. The CLI's
subprocess path itself is tested in tests/test_cli_sim.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any

_GRACE_SECONDS = 5.0


def _exit_code(code: Any) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _run_forked(target: Any, *, setup: Any = None) -> int:
    """Fork; the child runs ``setup()`` then ``target()`` and exits with its code."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setpgid(0, 0)
            if setup is not None:
                setup()
            code = _exit_code(target())
        except SystemExit as e:
            code = _exit_code(e.code)
        except BaseException:
            traceback.print_exc()
        finally:
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    return pid


def _wait(pid: int, timeout: float | None, on_timeout: Any = None) -> int:
    """Wait for ``pid``; past ``timeout`` stop its process group (SIGTERM, then SIGKILL)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    stopping_until = None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # anything it left running
            return os.waitstatus_to_exitcode(status)
        now = time.monotonic()
        if deadline is not None and now > deadline and stopping_until is None:
            if on_timeout is not None:
                on_timeout()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
            stopping_until = now + _GRACE_SECONDS
        if stopping_until is not None and now > stopping_until:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        time.sleep(0.005)


class _Forked:
    """A forked child as the CLI's set of running children holds one (by its ``pid``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid


def _serve() -> None:
    import torch  # noqa: F401  (what the fork saves)

    from torchplace import cli
    from torchplace.sim import _child, planning

    def run_child(config: dict[str, Any], script: planning.Script) -> int:
        def setup() -> None:
            if not script.output:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
            elif script.stdout_to_stderr:
                os.dup2(2, 1)
            sys.argv = [_child.__file__, config["config_path"]]
            sys.path[0] = os.getcwd()  # as for ``python -m``

        pid = _run_forked(lambda: _child.main([config["config_path"]]), setup=setup)
        child = _Forked(pid)
        # so that --nproc-per-node can stop a world's other ranks
        planning._LIVE[child] = []  # type: ignore[index]
        try:
            return _wait(
                pid, script.timeout, on_timeout=lambda: config.__setitem__("timed_out", True)
            )
        finally:
            planning._LIVE.pop(child, None)  # type: ignore[call-overload]

    planning._run_child = run_child
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # nothing but answers on the protocol's stream
    for line in sys.stdin:
        request = json.loads(line)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:

            def setup(out: Any = out, err: Any = err, request: Any = request) -> None:
                os.chdir(request["cwd"])
                os.environ.clear()
                os.environ.update(request["env"])
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.argv = ["torchplace", *request["argv"]]

            pid = _run_forked(lambda request=request: cli.main(request["argv"]), setup=setup)
            rc = _wait(pid, request.get("timeout"))
            out.seek(0)
            err.seek(0)
            answer = {
                "rc": rc,
                "stdout": out.read().decode(errors="replace"),
                "stderr": err.read().decode(errors="replace"),
            }
        protocol.write(json.dumps(answer) + "\n")
        protocol.flush()


class Zygote:
    """A running zygote: ``run(argv, env, cwd, timeout)`` -> (rc, stdout, stderr)."""

    def __init__(self, python: str = sys.executable) -> None:
        self.process = subprocess.Popen(
            [python, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(
        self, argv: list[str], env: dict[str, str], cwd: str, timeout: float
    ) -> tuple[int, str, str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"argv": argv, "env": env, "cwd": cwd, "timeout": timeout}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the conformance zygote died (exit {self.process.wait()})")
        answer = json.loads(line)
        return answer["rc"], answer["stdout"], answer["stderr"]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(30)


if __name__ == "__main__":
    _serve()
