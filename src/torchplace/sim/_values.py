"""``--values auto``: decide between real and placeholder values before paying for both.

Real values cost host memory equal to the simulated data and the CPU's time to compute it;
placeholders cost neither. ``auto`` should pay for real values only where they fit, and
never for both in full. Within one process the simulator can only find out on the way (it
switches to placeholders in place when an operation would not fit: ``simulate(values=
"auto")``), having paid real values up to the limit by then. The command line's child
process decides first instead, with a *scout*:

1. The child (torch imported, nothing run) forks. The copy, the scout, runs the script with
   placeholder values (fast, any size), counting the host memory real values would take,
   with its output held back and the script's side effects fenced off.
2. The scout stops at the first of:

   - **the real values would not fit** (the host-memory limit, or the memory available):
     placeholders it is. The scout *is* the run: it lets out the output it held and goes
     on; nothing was computed twice;
   - **the first optimizer step ends**, or the script ends: real values fit, so far;
   - **the script would see a value** (``.item()``, ``print``, ``.cpu()``: a placeholder
     value could steer it), or **would do something outside the process**: write or
     remove a file, start a process, open a connection, read its input. Real values fit
     so far.

   In the last two cases the scout ends, unseen, before that happens, and the child runs
   the script with real values (``values="auto"``: should a later step need more than the
   host has, it goes on with placeholders from there, in place). The scout's own cost is
   placeholder values up to that point: model construction and one step, typically.

So the script's output appears once and its files are written once: the scout's output is
either let out (it is the run) or discarded unseen, and it stops before any side effect.
The fence is Python's audit hooks (PEP 578): writes made by C code that does not go through
Python's ``open``/``os`` (some extension modules) are not seen. Writes to caches (Python's
``__pycache__``, ``~/.cache``) and ``mkdir`` of an existing folder are not side effects.

:func:`choose` is the decision as a function of a run's figures, for callers that decide
between runs (the ranks of a world, which exchange real data, must all hold the same kind).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import stat
import sys
import tempfile
import threading
import time
from typing import Any

__all__ = ["Scout", "choose", "explain", "scout_first"]

#: audit events that change something outside the process (PEP 578's table)
_OUTSIDE = frozenset(
    (
        "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.link", "os.symlink",
        "os.truncate", "os.chmod", "os.chown", "os.utime", "os.chflags", "os.lchflags",
        "shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.copytree",
        "shutil.move", "shutil.rmtree", "shutil.make_archive", "shutil.unpack_archive",
        "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
        "subprocess.Popen", "os.kill", "os.killpg", "socket.connect", "socket.bind",
        "socket.sendto", "socket.sendmsg", "builtins.input", "webbrowser.open",
        "sqlite3.connect", "http.client.connect", "urllib.Request",
    )
)  # fmt: skip
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_DECIDED_REAL = "real"
#: A scout whose script waits this long without working (sleeps, waits for input, a lock or
#: the network: under a tenth of a CPU busy, no simulated GPU work) decides for real values
#: there, so the script's output does not wait with it.
_IDLE_SECONDS = 2.0


def choose(requested: str, real_peak_bytes: int | None, limit: int | None) -> str:
    """The values a run should hold: ``requested``, or for ``"auto"``, ``"real"`` where its
    real values fit — at most ``real_peak_bytes`` at once, within ``limit`` — else
    ``"placeholder"``. The scout decides this way as the script runs; a caller that decides
    between runs (the ranks of a world, which exchange real data, decide together) can pass
    a placeholder run's ``report.values_decision["real_peak_bytes"]``: every report has it.

    Examples:
        >>> choose("auto", 3 * 2**30, 8 * 2**30), choose("auto", 9 * 2**30, 8 * 2**30)
        ('real', 'placeholder')
        >>> choose("placeholder", 1, 8 * 2**30), choose("auto", None, None)
        ('placeholder', 'real')
    """
    if requested != "auto":
        return requested
    if real_peak_bytes is None or limit is None:
        return "real"
    return "real" if real_peak_bytes <= limit else "placeholder"


def scout_first(config: dict[str, Any]) -> tuple[str, Scout | None, dict[str, Any] | None]:
    """Fork the scout (module docstring). Returns, in the scout, ``("placeholder", scout,
    None)``: run the script with placeholder values under ``scout.watch(state)``; in the
    child, once the scout has decided for real values, ``("auto", None, decision)``. If the
    scout was the run, the child exits with its exit code here and returns nothing.

    Where the script reads its input from a pipe or a file (which the scout would consume)
    there is no scout: ``("auto", None, None)``.
    """
    if not _stdin_is_safe():
        return "auto", None, None
    decision_path = config["report"] + ".scout.json"
    # Before the fork, for both: the first optimizer imports Dynamo (torch._disable_dynamo),
    # seconds the run after a scout would pay again. (A script that never imports it pays
    # them here; simulate() itself imports it where the process outlives the simulation.)
    importlib.import_module("torch._dynamo")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        return "placeholder", Scout(decision_path, config.get("host_memory_limit")), None
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the scout reports a stop
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if os.path.exists(decision_path):
        with open(decision_path) as f:
            decision = json.load(f)
        os.unlink(decision_path)
        if decision.get("values") == _DECIDED_REAL:
            return "auto", None, decision
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # the scout was the run, and died of a signal: so does its parent
        sys.stdout.flush()
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    raise SystemExit(code if code >= 0 else 128 - code)


def explain(report: Any, scout: Scout | None, decided: dict[str, Any] | None) -> None:
    """Say in ``report`` (of the command line's child) how ``--values auto`` decided: as the
    scout that became the run, or as the run with real values the scout decided for."""
    if scout is not None and scout.reason is not None:
        report.values = "placeholder"
        report.values_decision = {"requested": "auto", "ran": "placeholder",
                                  "reason": scout.reason, "placeholder_from": None}  # fmt: skip
        report.notes.insert(0, {"text": f"values: {scout.reason}", "count": 1})  # (first)
        return
    if decided is None or report.values_decision is None:
        return
    decision = report.values_decision
    decision["decided_at"] = {k: decided[k] for k in ("event", "file", "line")}
    if decision["ran"] == "real":
        decision["reason"] = decided["reason"]
    else:  # real values at first, then placeholders from a line on
        decision["reason"] = f"{decided['reason']}; then {decision['reason']}"


def _stdin_is_safe() -> bool:
    """Whether the scout may share the script's standard input: a terminal (reads are
    fenced) or nothing to read; not a pipe or file, whose data a read would consume."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return True  # no standard input
    return os.isatty(0) or stat.S_ISCHR(mode)  # a terminal, /dev/null


class Scout:
    """The scout's side (module docstring): holds the output, fences side effects, and
    decides when the simulation tells it (``SimState.scout``)."""

    def __init__(self, decision_path: str, limit: int | None) -> None:
        self.decision_path = decision_path
        self.limit = limit  # --host-memory-limit, if given
        self.reason: str | None = None  # why the scout became the run
        self.state: Any = None
        self.watching = False
        self._held: list[tuple[int, int, Any]] = []  # (fd, saved copy, temporary file)
        self._stdin: Any = None
        self._deciding = threading.Lock()  # one outcome, once (a thread watches for idling)
        self._outcome: str | None = None

    # --- set up, in the scout ------------------------------------------------------------
    def watch(self, state: Any) -> None:
        """Begin: hold the output, fence side effects, count host memory in ``state``."""
        from torchplace.sim.accounting._hostmem import host_memory
        from torchplace.sim.emulation._simulate import _host_memory_limit

        self.state = state
        available, total = host_memory()
        limit = self.limit or _host_memory_limit()  # as the run with real values has it
        if available is not None and total is not None:
            room = available - max(1024**3, total // 20)
            limit = room if limit is None else min(limit, room)
        state.host_limit = limit
        state.counts_host = limit is not None
        state.scout = self
        self._hold_output()
        self._stdin = sys.stdin
        sys.stdin = _FencedInput(sys.stdin, self)
        sys.addaudithook(self._audit)
        self._fence_spawn()
        self.watching = True
        threading.Thread(target=self._watch_idle, name="torchplace-scout", daemon=True).start()

    def _watch_idle(self) -> None:
        """Decide for real values once the script has waited ``_IDLE_SECONDS`` without
        working: a first look is worth its held output only while it makes progress."""
        seq, cpu, since = -1, time.process_time(), time.monotonic()
        while self.watching:
            time.sleep(_IDLE_SECONDS / 8)
            now, used = time.monotonic(), time.process_time()
            if self.state.trace.seq != seq or used - cpu > (now - since) / 10:
                seq, cpu, since = self.state.trace.seq, used, now
            elif now - since >= _IDLE_SECONDS:
                self._decide_real(
                    f"the script waited {_IDLE_SECONDS:g} s without working", where=False
                )

    def _fence_spawn(self) -> None:
        """multiprocessing's spawn and forkserver start processes without an audit event
        (``_posixsubprocess.fork_exec``): fence the function they start them with."""
        import multiprocessing.util

        real = multiprocessing.util.spawnv_passfds

        def spawnv_passfds(*args: Any, **kwargs: Any) -> Any:
            if self.watching:
                self._decide_real("the script would start a process (multiprocessing)")
            return real(*args, **kwargs)

        multiprocessing.util.spawnv_passfds = spawnv_passfds

    def _hold_output(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        same = _same_file(1, 2)
        shared = None
        for fd in (1, 2):
            try:
                saved = os.dup(fd)
            except OSError:
                continue  # closed
            held = shared if same and shared is not None else tempfile.TemporaryFile()  # noqa: SIM115 (held until the scout decides)
            shared = held
            os.dup2(held.fileno(), fd)
            self._held.append((fd, saved, held))

    # --- what the simulation tells it -------------------------------------------------------
    def short_of_host(self, why: str) -> None:
        """Real values would not fit: placeholders, and this is the run."""
        from torchplace.sim.accounting._state import user_frame
        from torchplace.sim.summary import place

        at = user_frame()
        where = f" at {place(*at)}" if at else ""
        self._become_run(f"placeholder values from the start, because{where} {why}")

    def read(self) -> None:
        """A value is about to be read back to the host (``.item()``, ``print``, ``.cpu()``)."""
        if self.watching:
            self._decide_real("the script read a value back from the GPU")

    def step(self) -> None:
        """The first optimizer step ended."""
        if self.watching:
            self._decide_real("the first optimizer step ended")

    def script_over(self) -> None:
        """The script has returned: what follows (the simulation's own clean-up) is not the
        script's doing, and the fence is lifted."""
        self.watching = False

    def finish(self, stopped: bool) -> None:
        """The script ended (``stopped``: by a signal or Ctrl-C, which the run reports)."""
        if self._outcome is not None:
            return
        if stopped:
            self._become_run("placeholder values: the run was stopped before it was decided")
            return
        self._decide_real("the script ended", where=False)

    # --- the two outcomes -----------------------------------------------------------------
    def _become_run(self, reason: str) -> None:
        with self._deciding:
            if self._outcome is None:
                self._outcome = "run"
                self._let_out(reason)

    def _let_out(self, reason: str) -> None:
        self.watching = False
        self.reason = reason
        self.state.scout = None
        self.state.counts_host = False
        if self._stdin is not None:
            sys.stdin = self._stdin
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved, _ in self._held:
            os.dup2(saved, fd)
            os.close(saved)
        written: set[int] = set()
        for fd, _, held in self._held:  # what the script wrote so far, now
            if id(held) in written:
                continue
            written.add(id(held))
            held.seek(0)
            while chunk := held.read(1 << 20):
                os.write(fd, chunk)
            held.close()
        self._held = []

    def _decide_real(self, event: str, *, where: bool = True) -> None:
        with self._deciding:  # (the other outcome, under way in another thread, ends here)
            if self._outcome is None:
                self._outcome = _DECIDED_REAL
                self._end_unseen(event, where)

    def _end_unseen(self, event: str, where: bool) -> None:
        from torchplace._units import format_bytes
        from torchplace.sim.accounting._state import user_frame
        from torchplace.sim.summary import place

        self.watching = False  # (writing the decision is no side effect of the script's)
        state = self.state
        at = user_frame() if where else None
        limit = (
            f", within the limit of {format_bytes(state.host_limit)}" if state.host_limit else ""
        )
        decision = {
            "values": _DECIDED_REAL,
            "event": event,
            "file": at[0] if at else None,
            "line": at[1] if at else None,
            "reason": (
                f"a first look with placeholder values, until {event}"
                + (f" (at {place(*at)})" if at else "")
                + f", found that real values would take at most "
                f"{format_bytes(state.host_peak)} at once{limit}"
            ),
        }
        tmp = self.decision_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(decision, f)
        os.replace(tmp, self.decision_path)
        os._exit(0)  # unseen: its output is discarded, and what it was about to do undone

    # --- the fence ------------------------------------------------------------------------
    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.watching:
            return
        if event == "open":
            if not _writes(args) or _exempt(args[0]):
                return
        elif event not in _OUTSIDE or _harmless(event, args):
            return
        self._decide_real(f"the script would change something outside the process ({event})")


class _FencedInput:
    """``sys.stdin`` in the scout: the first read decides first (the scout must not take
    input the run needs)."""

    def __init__(self, wrapped: Any, scout: Scout) -> None:
        self._wrapped = wrapped
        self._scout = scout

    def __getattr__(self, name: str) -> Any:
        if name.startswith("read") and self._scout.watching:
            self._scout._decide_real("the script read its input")
        return getattr(self._wrapped, name)

    def __iter__(self) -> Any:
        if self._scout.watching:
            self._scout._decide_real("the script read its input")
        return iter(self._wrapped)


def _harmless(event: str, args: tuple[Any, ...]) -> bool:
    """A file event that changes nothing a person sees: ``mkdir`` of a folder that exists,
    or on a cache or the simulator's own scratch files (:func:`_exempt`)."""
    if not args or event not in ("os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree"):
        return False
    return (event == "os.mkdir" and _exists(args[0])) or _exempt(args[0])


def _writes(args: tuple[Any, ...]) -> bool:
    mode = args[1] if len(args) > 1 else None
    flags = args[2] if len(args) > 2 else 0
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _exempt(path: Any) -> bool:
    """Caches, the simulator's own scratch files and pseudo-files: writing them twice
    changes nothing a person sees."""
    if isinstance(path, int):
        return path in (0, 1, 2)
    try:
        text = os.path.abspath(os.fsdecode(path))
    except (TypeError, ValueError):
        return False
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    own = ("torchplace-sim-", "torchplace-placeholder-")
    return (
        "__pycache__" in text
        or text.startswith((os.path.abspath(cache) + os.sep, "/dev/", "/proc/", "/sys/"))
        or os.path.basename(text).startswith(own)
        or os.path.basename(os.path.dirname(text)).startswith(own)
    )


def _exists(path: Any) -> bool:
    try:
        return os.path.isdir(path)
    except (TypeError, ValueError):
        return False


def _same_file(a: int, b: int) -> bool:
    try:
        return os.path.samestat(os.fstat(a), os.fstat(b))
    except OSError:
        return False
