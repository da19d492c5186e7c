"""Planning a whole script: run it on simulated GPUs in a child process and read its report.

What ``torchplace sim`` does, as functions (the command line only parses its options
into these calls and renders what they return):

- :func:`run`: the script once on one GPU model, or on several (``gpu="all"``, a list):
  one run on the largest, replayed on the others (:mod:`torchplace.sim.plan`); a
  :class:`~torchplace.sim.report.SimReport`, with the cost of 1,000 steps when given
  ``prices``.
- :func:`ranks`: the ranks of a torchrun world (``nproc_per_node``, ``nnodes``), each in
  its own child: per-rank memory and time in ``report.ranks``.
- :func:`find_max`: the largest value of a ``{NAME}`` written in the script's arguments
  (or an environment variable) that fits each GPU (:mod:`torchplace.sim.search`).

The script runs in a child process (``python -m torchplace.sim._child``), in its own
process group, so a script that crashes or exits takes nothing down with it. While one
of these functions runs in the main thread, Ctrl-C and SIGTERM are passed on to the
children (:func:`signals`): the first Ctrl-C reaches the script as ``KeyboardInterrupt``,
a second one or SIGTERM stops it (SIGKILL after :data:`GRACE_SECONDS`), no further run
starts, and the result says it was interrupted (``report.interrupted``,
:attr:`FindMax.interrupted`) — ``torchplace sim`` then exits 130 or 143.

Examples:
    >>> from torchplace.sim import planning
    >>> report = planning.run(gpu="T4", values="placeholder", output=False)  # the example
    >>> report.gpu["key"], report.exit_code
    ('t4', 0)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchplace.catalog import GPUSpec
    from torchplace.sim.report import SimReport
    from torchplace.sim.search import SearchResult

__all__ = [
    "EXAMPLE",
    "GRACE_SECONDS",
    "FindMax",
    "Script",
    "add_costs",
    "find_max",
    "gpus",
    "ranks",
    "run",
    "signals",
]

#: the script run when none is given: a tutorial-style training loop
EXAMPLE = "torchplace.sim.example"
#: after SIGTERM, how long a child may take to write its report before it is killed
GRACE_SECONDS = 5.0
#: Host memory a simulated rank's process takes before its tensors: Python, torch and
#: torch.distributed (310 MiB RSS measured for an FSDP2 rank on torch 2.13), rounded up.
RANK_PROCESS_BYTES = 384 * 2**20

Progress = Callable[[str], None]


@dataclass
class Script:
    """What to run and how: a script path (or a module with ``module=True``), its
    arguments and the simulation's options (those of :func:`torchplace.simulate`, plus
    ``write_files``, ``timeline`` for the HTML page and PNG, and ``snapshot``, a path
    for a CUDA memory snapshot)."""

    target: str = EXAMPLE
    args: list[str] = field(default_factory=list)
    module: bool = False
    values: str = "auto"
    gpus: int = 1
    memory: int | None = None
    context_bytes: int | None = None
    host_memory_limit: int | None = None
    write_files: bool = False
    timeline: bool = False
    snapshot: str | None = None
    timeout: float | None = None  # seconds; the run is stopped and reports what it did
    output: bool = True  # the script's output shown (False: discarded)
    stdout_to_stderr: bool = False  # the script's stdout goes to stderr (a JSON report)

    def __post_init__(self) -> None:
        if self.target == EXAMPLE:
            self.module = True
        if self.gpus < 1:
            raise ValueError(f"gpus must be at least 1, got {self.gpus}.")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout}.")
        if self.values not in ("auto", "real", "placeholder"):
            raise ValueError(
                f"values must be 'auto', 'real' or 'placeholder', got {self.values!r}."
            )

    def options(self) -> dict[str, Any]:
        """The child's configuration (torchplace.sim._child reads it)."""
        return {
            "target": self.target,
            "module": self.module,
            "args": list(self.args),
            "gpus": self.gpus,
            "memory": self.memory,
            "context_bytes": self.context_bytes,
            "host_memory_limit": self.host_memory_limit,
            "write_files": self.write_files,
            "timeline": self.timeline,
            "snapshot": os.path.abspath(self.snapshot) if self.snapshot else None,
        }

    def but(self, **changes: Any) -> Script:
        return Script(**{**self.__dict__, **changes})


def _script(script: Script | str | None, args: Sequence[str], kw: dict[str, Any]) -> Script:
    if isinstance(script, Script):
        if args or kw:
            return script.but(**({"args": list(args)} if args else {}), **kw)
        return script
    return Script(target=script or EXAMPLE, args=list(args), **kw)


def gpus(gpu: str | Sequence[str]) -> list[GPUSpec]:
    """GPU models from the catalog: one name, several (a list, or ``"A100,H100"``) or
    ``"all"``; duplicates removed."""
    from torchplace import catalog

    names = gpu.split(",") if isinstance(gpu, str) else list(gpu)
    if len(names) == 1 and names[0].strip().lower() == "all":
        return list(catalog.gpus())
    specs = [catalog.lookup(part.strip()) for part in names if part.strip()]
    if not specs:
        raise ValueError(f"--gpu names no GPU: {gpu!r}; give a catalog name, a list, or all.")
    return list({s.key: s for s in specs}.values())


# --- one run in a child process --------------------------------------------------------


def run(
    script: Script | str | None = None,
    args: Sequence[str] = (),
    *,
    gpu: str | Sequence[str] = "h100-sxm-80gb",
    prices: dict[str, float] | None = None,
    **options: Any,
) -> SimReport:
    """Run ``script`` (a path; a module with ``module=True``; None: the built-in example)
    with ``args`` on simulated ``gpu`` in a child process, and return its report.

    Several GPU models (``gpu="all"``, ``"A100,H100"``, a list): the script runs once on
    the largest and is replayed on the others (``report.plan``), once more per kind of GPU
    on which it chose another attention kernel. ``prices`` (GPU name to US dollars per
    hour) add the cost of 1,000 steps (``report.costs``). ``options`` are :class:`Script`'s.
    """
    spec = _script(script, args, options)
    specs = gpus(gpu)
    with signals():
        report = _simulate(spec, specs[0], None) if len(specs) == 1 else _plan(spec, specs)
    if prices:
        add_costs(report, prices)
    return report


def _simulate(script: Script, spec: GPUSpec, plan_gpus: list[GPUSpec] | None, **extra: Any) -> Any:
    """Run the script once on ``spec`` (its report replayed on ``plan_gpus``). With values
    ``auto`` the child decides, once, in the same run (torchplace.sim._values)."""
    from torchplace.sim.report import SimReport

    with tempfile.TemporaryDirectory(prefix="torchplace-sim-") as tmp:
        config: dict[str, Any] = {
            **script.options(),
            "env": {},
            **extra,
            "gpu": spec.key,
            "values": script.values,
            "plan_gpus": [s.key for s in plan_gpus] if plan_gpus else None,
            "report": os.path.join(tmp, "report.json"),
            "config_path": os.path.join(tmp, "config.json"),
        }
        with open(config["config_path"], "w") as f:
            json.dump(config, f)
        rc = _run_child(config, script)
        sys.stdout.flush()
        if os.path.exists(config["report"]):
            with open(config["report"]) as f:
                report = SimReport.from_dict(json.load(f))
        else:
            report = SimReport(
                gpu={"key": spec.key, "name": spec.name, "torch_name": spec.torch_name},
                script=script.target,
                values=script.values,
            )
            report.error = {"type": "ProcessDied", "message": _died(rc), "file": None, "line": None}
            if config.get("interrupted"):
                report.error.update(
                    _not_finished(config["interrupted"], started=not config.get("not_started"))
                )
    if config.get("timed_out"):
        report.error = {
            "type": "Timeout",
            "message": f"the run was stopped after {script.timeout:g} s (--timeout)",
            "file": (report.error or {}).get("file"),
            "line": (report.error or {}).get("line"),
        }
    report.exit_code = rc if rc >= 0 else 128 - rc
    if config.get("interrupted"):
        report.interrupted = signal.Signals(config["interrupted"]).name
        if rc < 0:  # killed after the grace period
            report.exit_code = 128 + config["interrupted"]
    return report


def _died(rc: int) -> str:
    name = signal.Signals(-rc).name if rc < 0 and -rc in signal.valid_signals() else str(rc)
    return (
        f"the simulated process died ({name}) before it could report; some torch builds "
        "abort the process on CUDA paths without a driver — run the script under "
        "`python -X faulthandler` to see where"
    )


def _not_finished(signum: int, *, started: bool) -> dict[str, Any]:
    """The error of a run that a signal stopped before it could write its report."""
    what = _signal_text(signum)
    if not started:
        message = f"not run: torchplace sim was stopped ({what}) before this run started"
    else:
        message = (
            f"the script was stopped ({what}) and did not exit within {GRACE_SECONDS:g} s "
            "of SIGTERM, so it was killed before it could report"
        )
    return {"type": "Interrupted" if signum == signal.SIGINT else "Terminated", "message": message}


def _signal_text(signum: int) -> str:
    return "Ctrl-C, SIGINT" if signum == signal.SIGINT else signal.Signals(signum).name


# --- child processes and signals -------------------------------------------------------

# simulated children running now -> when they were sent SIGTERM (empty: not yet)
_LIVE: dict[subprocess.Popen[bytes], list[float]] = {}
_RECEIVED: list[int] = []  # SIGINT / SIGTERM received while signals() is active, in order
_ACTIVE: list[bool] = []  # signals() entered and not left (nested calls share the first)


def _run_child(config: dict[str, Any], script: Script) -> int:
    """Run the child in its own process group and wait for it. Ctrl-C and SIGTERM reach it
    through :func:`_forward` (a terminal sends them to the foreground group: this process);
    past the script's ``timeout`` it gets SIGTERM, which it turns into an error it reports;
    a child that has not stopped ``GRACE_SECONDS`` after a SIGTERM is killed."""
    if _RECEIVED:  # interrupted before this run could start: do not start it
        config["interrupted"], config["not_started"] = _RECEIVED[0], True
        return 128 + _RECEIVED[0]
    cmd = [sys.executable, "-m", "torchplace.sim._child", config["config_path"]]
    silent = not script.output
    out: Any = subprocess.DEVNULL if silent else (sys.stderr if script.stdout_to_stderr else None)
    # a simulation of its own, even when this runs inside one (a simulated script that
    # calls torchplace sim): not the one torchplace.sim.emulation._processes.ENV names
    env = {k: v for k, v in os.environ.items() if k != "TORCHPLACE_SIM_PROCESSES"}
    child = subprocess.Popen(
        cmd,
        stdout=out,
        stderr=subprocess.DEVNULL if silent else None,
        start_new_session=True,
        env=env,
    )
    stopping: list[float] = []  # when it was sent SIGTERM
    _LIVE[child] = stopping
    deadline = None if script.timeout is None else time.monotonic() + script.timeout
    try:
        while True:
            try:
                code = child.wait(0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if deadline is not None and now > deadline and not stopping:
                config["timed_out"] = True
                _signal_group(child, stopping, signal.SIGTERM)
            if stopping and now > stopping[0] + GRACE_SECONDS:
                _signal_group(child, stopping, signal.SIGKILL)
    finally:
        del _LIVE[child]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)  # anything the script left running
    if _RECEIVED:
        config["interrupted"] = _RECEIVED[0]
    return code


def _stop_all(how: int = signal.SIGKILL) -> None:
    """Stop every simulated child now running (``how=SIGTERM`` lets each write its report)."""
    for child, stopping in list(_LIVE.items()):
        _signal_group(child, stopping, how)


def _signal_group(child: subprocess.Popen[bytes], stopping: list[float], signum: int) -> None:
    if signum == signal.SIGTERM and not stopping:
        stopping.append(time.monotonic())
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signum)


def _forward(signum: int, frame: object = None) -> None:
    """SIGINT or SIGTERM: pass it on to every simulated child. The first Ctrl-C reaches
    the script as Ctrl-C (KeyboardInterrupt, its handlers run); a second one, or SIGTERM,
    stops it (then SIGKILL after ``GRACE_SECONDS``)."""
    _RECEIVED.append(signum)
    stop = signum == signal.SIGTERM or _RECEIVED.count(signal.SIGINT) > 1
    for child, stopping in list(_LIVE.items()):
        _signal_group(child, stopping, signal.SIGTERM if stop else signal.SIGINT)


@contextlib.contextmanager
def signals() -> Iterator[None]:
    """Pass SIGINT and SIGTERM on to the simulated children while the block runs (in the
    main thread; elsewhere Python delivers no signals). Nested uses share the outermost:
    a signal received anywhere inside it stops every run that has not started."""
    if _ACTIVE:
        yield
        return
    _RECEIVED.clear()
    _ACTIVE.append(True)
    previous = {}
    try:
        if threading.current_thread() is threading.main_thread():
            previous = {s: signal.signal(s, _forward) for s in (signal.SIGINT, signal.SIGTERM)}
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _ACTIVE.clear()


def _interrupted() -> str | None:
    """The signal that stopped the work (SIGTERM if one came, else SIGINT), or None."""
    if not _RECEIVED:
        return None
    return "SIGTERM" if signal.SIGTERM in _RECEIVED else "SIGINT"


# --- several GPU models: one run, replayed ---------------------------------------------


def _plan(script: Script, specs: list[GPUSpec]) -> Any:
    """Several GPUs: one run on the largest, replayed on all; when the run made a choice
    that depends on the GPU (the attention kernel), one more run per other kind of GPU."""
    from torchplace.sim import plan

    groups = plan.classes(specs)
    first = max(groups, key=lambda g: g[0].torch_total_bytes)
    report = _simulate(script, first[0], specs)
    rows = {g["key"]: g for g in (report.plan or {}).get("gpus", [])}
    runs = [{"gpu": first[0].key, "class": [s.key for s in specs]}]
    kernel_choice = any("attention kernel" in d for d in report.decisions)
    for group in groups if kernel_choice else []:
        if _RECEIVED:
            break  # interrupted: the rows of the runs made so far
        if group is first:
            runs[0]["class"] = [s.key for s in group]
            continue
        other = _simulate(script.but(snapshot=None), group[0], group)  # snapshot: first run
        rows.update({g["key"]: g for g in (other.plan or {}).get("gpus", [])})
        runs.append({"gpu": group[0].key, "class": [s.key for s in group]})
        if other.exit_code and not report.exit_code:
            report.exit_code = other.exit_code
    assumptions = []
    if any("properties" in d for d in report.decisions):
        assumptions.append(
            "the script read the GPU's properties (name, memory, capability); each row "
            "assumes it took the same path as on the GPU it ran on"
        )
    report.plan = {"gpus": list(rows.values()), "runs": runs, "assumptions": assumptions}
    return report


def add_costs(report: SimReport, prices: dict[str, float]) -> None:
    """Add the cost of 1,000 steps at ``prices`` (GPU name to US dollars per GPU-hour) to
    ``report.costs``, per GPU model of the report (one step on ``n`` GPUs costs ``n``
    GPU-hours' worth of its time)."""
    from torchplace import catalog

    by_key = {}
    for name, usd in prices.items():
        if not (isinstance(usd, int | float) and 0 < usd < float("inf")):
            raise ValueError(f"the price of {name} must be a positive number, got {usd!r}.")
        by_key[catalog.lookup(name).key] = float(usd)
    rows = (report.plan or {}).get("gpus") or [
        {"key": report.gpu.get("key"), "devices": len(report.devices),
         "estimated_step_seconds": max((d.estimated_step_seconds or 0.0 for d in report.devices),
                                       default=0.0) or None}
    ]  # fmt: skip
    costs = {}
    for row in rows:
        price, step = by_key.get(row["key"]), row.get("estimated_step_seconds")
        if price is not None and step and not row.get("oom"):
            costs[row["key"]] = step * 1000 / 3600 * price * row.get("devices", 1)
    report.costs = {
        "usd_per_hour": by_key,
        "usd_per_1000_steps": costs,
        "not_simulated": sorted(set(by_key) - {row["key"] for row in rows}),
    }


# --- the ranks of a torchrun world -----------------------------------------------------


def ranks(
    script: Script | str | None = None,
    args: Sequence[str] = (),
    *,
    nproc_per_node: int | Sequence[int],
    nnodes: int = 1,
    rank: str | Sequence[int] = "ends",
    gpu: str = "h100-sxm-80gb",
    network: str | None = None,
    prices: dict[str, float] | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> SimReport:
    """Simulate ``script`` as torchrun would start it: ``nproc_per_node`` processes on each
    of ``nnodes`` nodes (several values sweep world sizes), one child per rank. ``rank``
    says which ranks are reported: ``"ends"`` (0 and the last, where the work of ranks can
    differ), ``"all"``, or a list. The report is the first rank's, with one entry per world
    in ``report.ranks`` (per rank: peak memory, step time split into compute and
    communication, error).

    With real values (``auto`` when the data fits) every rank of a world runs at once and
    the simulated NCCL is gloo, so collectives move the ranks' real data; each rank gets an
    equal share of the host memory limit. With placeholders (asked for, or when the ranks
    would not fit) only the ranks shown run, each alone under torch's fake process group.
    ``progress`` is told what changed (a world repeated with placeholders).
    """
    spec = _script(script, args, options)
    specs = gpus(gpu)
    if len(specs) != 1:
        raise ValueError("--nproc-per-node simulates one GPU model; give one --gpu.")
    if nnodes < 1:
        raise ValueError(f"--nnodes must be at least 1, got {nnodes}.")
    per_nodes = [nproc_per_node] if isinstance(nproc_per_node, int) else list(nproc_per_node)
    if not per_nodes or any(not isinstance(n, int) or n < 1 for n in per_nodes):
        raise ValueError(f"--nproc-per-node takes whole numbers >= 1, got {nproc_per_node!r}.")
    worlds = [(n, n * nnodes, rank_list(rank, n * nnodes)) for n in per_nodes]
    sweep: list[dict[str, Any]] = []
    first: Any = None
    notes: list[str] = []
    with signals():
        try:
            for per_node, world, shown in worlds:
                layout = _World(spec, specs[0], per_node, world, nnodes, network)
                reports, note = layout.run(shown, first is None, progress)
                notes += [note] if note else []
                sweep.append(
                    {
                        "nproc_per_node": per_node,
                        "nnodes": nnodes,
                        "world": world,
                        "values": reports[shown[0]].values,
                        "ranks": [_rank_row(r, r % per_node, reports[r]) for r in shown],
                    }
                )
                first = first or reports[shown[0]]
        finally:
            _stop_all()
        first.ranks = sweep
        for note in notes:
            first.notes.insert(0, {"text": note, "count": 1})
        first.interrupted = _interrupted() or first.interrupted
    if prices:
        add_costs(first, prices)
    return first


def rank_list(rank: str | Sequence[int], world: int) -> list[int]:
    """The ranks to report of a world of ``world``: ``"ends"``, ``"all"``, or ranks given
    as a list or as text (``"0,3"``)."""
    if rank == "ends":
        return sorted({0, world - 1})
    if rank == "all":
        return list(range(world))
    chosen: list[int] = []
    if isinstance(rank, str):
        with contextlib.suppress(ValueError):
            chosen = [int(part) for part in rank.split(",") if part.strip()]
    else:
        chosen = list(rank)
    if not chosen:
        raise ValueError(f"--rank takes 'ends', 'all' or rank numbers such as 0,3; got {rank!r}.")
    bad = [r for r in chosen if not 0 <= r < world]
    if bad:
        raise ValueError(f"--rank {bad[0]} is not a rank of a world of {world} processes.")
    return chosen


@dataclass
class _World:
    """One torchrun world: ``world`` processes, ``per_node`` on each of ``nnodes`` nodes."""

    script: Script
    spec: GPUSpec
    per_node: int
    world: int
    nnodes: int
    network: str | None

    def run(
        self, shown: list[int], output: bool, progress: Progress | None
    ) -> tuple[dict[int, Any], str | None]:
        """The reports of the ranks ``shown`` (by rank), and a note when its values are
        not what was asked for."""
        values, world = self.script.values, self.world
        if values == "placeholder":
            return self._alone(shown, output), None
        from torchplace._units import format_bytes
        from torchplace.sim.emulation._simulate import _host_memory_limit

        total = self.script.host_memory_limit or _host_memory_limit()
        share = total // world - RANK_PROCESS_BYTES if total else None  # None: unknown
        if share is not None and share <= 0:
            why = (
                f"{world} rank processes need about {format_bytes(world * RANK_PROCESS_BYTES)} "
                f"of host memory before any data, more than the {format_bytes(total or 0)} "
                "allowed (half the memory available; --host-memory-limit sets it)"
            )
            if values == "real":
                raise ValueError(f"--values real: {why}. Simulate with --values placeholder.")
            note = f"values: placeholder for the {world}-rank world — {why}"
            return self._alone(shown, output), note
        every = self._together(shown, output, share)
        error = next((r.error for r in every.values() if _host_full(r.error)), None)
        if error is None or values == "real":
            return {r: every[r] for r in shown}, None
        where = f" (at {error['file']}:{error['line']})" if error.get("file") else ""
        note = (
            f"values: placeholder for the {world}-rank world — the run was repeated with "
            f"placeholder values because the real values of {world} ranks would not fit in "
            f"host memory{where}; values read back are zeros"
        )
        if progress:
            progress(note)
        return self._alone(shown, output), note

    def _rank(self, rank: int, port: int, shown: bool, values: str, share: int | None) -> Any:
        env = _rank_env(rank, self.per_node, self.world, port)
        script = self.script.but(
            values=values,
            gpus=self.per_node,
            output=self.script.output and shown,
            snapshot=self.script.snapshot if shown else None,  # the first rank simulated
            **({"host_memory_limit": share} if values == "real" else {}),
        )
        return _simulate(script, self.spec, None, env=env, nodes=self.nnodes, network=self.network)

    def _alone(self, shown: list[int], output: bool) -> dict[int, Any]:
        """Placeholder values: each rank shown runs alone under torch's fake process group,
        as many at once as there are CPUs."""

        def simulate_rank(i: int) -> Any:
            return self._rank(shown[i], 29500, output and i == 0, "placeholder", None)

        workers = max(1, min(len(shown), os.cpu_count() or 1))
        with ThreadPoolExecutor(workers) as pool:
            return dict(zip(shown, pool.map(simulate_rank, range(len(shown))), strict=True))

    def _together(self, shown: list[int], output: bool, share: int | None) -> dict[int, Any]:
        """Real values: all ranks at once, over gloo, each with ``share`` bytes of host
        memory for its data; every rank's report. As torchrun does, the first rank to fail
        stops the others (they could wait forever in a collective); their reports say so."""
        port = _free_port()
        failed: list[tuple[float, int, Any]] = []
        lock = threading.Lock()

        def simulate_rank(rank: int) -> Any:
            report = self._rank(rank, port, output and rank == shown[0], "real", share)
            if report.exit_code:
                with lock:
                    if not failed:  # the other ranks write their reports and stop
                        _stop_all(how=signal.SIGTERM)
                    failed.append((time.monotonic(), rank, report))
            return report

        # torchrun sets OMP_NUM_THREADS=1 for more than one process per node unless it is
        # set (torch/distributed/run.py); OpenMP reads it when a process starts, so the
        # children inherit it from here
        one_thread = "OMP_NUM_THREADS" not in os.environ and self.per_node > 1
        if one_thread:
            os.environ["OMP_NUM_THREADS"] = "1"
        try:
            with ThreadPoolExecutor(self.world) as pool:  # all at once: they wait for each other
                every = range(self.world)
                reports = dict(zip(every, pool.map(simulate_rank, every), strict=True))
        finally:
            if one_thread:
                del os.environ["OMP_NUM_THREADS"]
        if failed:  # the ranks that ended after the first failure: torchrun would stop them
            _, rank, first = min(failed, key=lambda f: f[0])  # the first whose process ended
            error = first.error or {"type": "exit", "message": f"exit code {first.exit_code}"}
            for other, report in reports.items():
                own = report.error
                if other == rank or not own:
                    continue
                why = "" if own["type"] == "Terminated" else (
                    f"; it ended first with {own['type']}: {own['message'].splitlines()[0]}"
                )  # fmt: skip
                report.error = {
                    **own,
                    "type": "Stopped",
                    "message": f"stopped when rank {rank} failed ({error['type']}: "
                    f"{error['message']}), as torchrun stops the other ranks{why}",
                }
        return reports


def _host_full(error: dict[str, Any] | None) -> bool:
    """A rank's real values did not fit its share of host memory (not a host-built tensor,
    which would not fit with placeholders either)."""
    return bool(
        error
        and error.get("type") == "HostMemoryError"
        and "hold real values" in error.get("message", "")
    )


def _rank_env(rank: int, per_node: int, world: int, port: int) -> dict[str, str]:
    """What torchrun sets for one rank (torch/distributed/run.py, elastic agent)."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank % per_node),
        "GROUP_RANK": str(rank // per_node),
        "NODE_RANK": str(rank // per_node),
        "ROLE_RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(per_node),
        "ROLE_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RUN_ID": "torchplace-sim",
        "TORCHELASTIC_RESTART_COUNT": "0",
    }


def _free_port() -> int:
    """A TCP port free on this host now, for the world's rendezvous (gloo's store)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_row(rank: int, local: int, report: Any) -> dict[str, Any]:
    """What one simulated rank used: its GPU (cuda:LOCAL_RANK), time split, error. A rank
    of a script that never starts a process group shows the GPU it used (cuda:0)."""
    used = local
    if report.distributed is False and report.devices:
        used = max(report.devices, key=lambda d: d.peak_allocated_bytes).index
    d = report.devices[used] if used < len(report.devices) else None
    by_bound = (d.estimate.get("seconds_by_bound", {}) if d else {}) or {}
    steps = max(d.steps, 1) if d else 1
    comm = by_bound.get("communication", 0.0) / steps
    total = (d.estimated_step_seconds or d.estimated_total_seconds) if d else None
    row = {
        "rank": rank,
        "local_rank": local,
        "device": used,
        "context_bytes": d.context_bytes if d else 0,
        "peak_allocated_bytes": d.peak_allocated_bytes if d else 0,
        "peak_reserved_bytes": d.peak_reserved_bytes if d else 0,
        "capacity_bytes": d.capacity_bytes if d else 0,
        "verdict": d.verdict if d else "-",
        "peak_breakdown": dict(d.peak_breakdown) if d else {},
        "step_seconds": total,
        "communication_seconds": comm,
        "compute_seconds": (total - comm) if total is not None else None,
        "error": report.error,
        "distributed": report.distributed,
    }
    if used < len(report.timelines):  # the HTML page / PNG
        row["timeline"] = report.timelines[used]
    return row


# --- the largest size that fits --------------------------------------------------------


@dataclass
class FindMax:
    """What :func:`find_max` found: per GPU key, the largest size that fits."""

    token: str  # "{NAME}"
    results: dict[str, SearchResult]
    interrupted: str | None = None  # "SIGINT" / "SIGTERM": the search stopped early

    @property
    def exit_code(self) -> int:
        """What ``torchplace sim --find-max`` exits with: 0, or 130 / 143 if interrupted."""
        return 128 + signal.Signals[self.interrupted] if self.interrupted else 0

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "schema_version": 1,
            "find_max": {k: r.to_dict() for k, r in self.results.items()},
        }
        if self.interrupted:
            found["stopped"] = f"interrupted: exit code {self.exit_code}"
        return found


def find_max(
    script: Script | str | None = None,
    args: Sequence[str] = (),
    *,
    name: str,
    gpu: str | Sequence[str] = "h100-sxm-80gb",
    low: int = 1,
    high: int | None = None,
    margin: float = 0.05,
    progress: Progress | None = None,
    **options: Any,
) -> FindMax:
    """The largest value of ``{name}`` that fits each of ``gpu`` (doubling, then bisection;
    :func:`torchplace.sim.search.search`). ``{name}`` is written in the script's ``args``
    (``["--batch-size", "{BATCH}"]``) or in an environment variable. A size fits when its
    run raised no out-of-memory error and its peak reserved memory leaves ``margin`` (a
    fraction of what the allocator can reserve) free. Values default to placeholders
    (``values="auto"`` means them here: any size costs no host memory). ``progress`` is
    told each size's verdicts. Interrupted, it returns what was measured so far."""
    from torchplace.sim.search import FindMaxError, Probe, StopSearch, search

    if options.get("values", "auto") == "auto":
        options["values"] = "placeholder"
    base = _script(script, args, {"output": False, **options})
    if not 0 <= margin <= 0.5:
        raise ValueError(f"--margin must be a fraction from 0 to 0.5 (50%), got {margin!r}.")
    token = "{" + name + "}"
    env_keys = [k for k, v in os.environ.items() if token in v]
    if not any(token in a for a in base.args) and not env_keys:
        raise ValueError(
            f"--find-max {name}: {token} appears in no argument of the script and in no "
            f"environment variable; write it where the size goes, e.g. "
            f"torchplace sim --find-max {name} train.py --batch-size {token}"
        )
    specs = gpus(gpu)
    saved_env = {k: os.environ[k] for k in env_keys}

    def probe(size: int) -> dict[str, Probe]:
        sized = base.but(args=[a.replace(token, str(size)) for a in base.args])
        for k, v in saved_env.items():
            os.environ[k] = v.replace(token, str(size))
        try:
            if len(specs) == 1:
                report = _simulate(sized, specs[0], None)
                rows = [_row(specs[0].key, report)]
            else:
                report = _plan(sized, specs)
                rows = report.plan["gpus"]
        finally:
            os.environ.update(saved_env)
        if _RECEIVED:  # this size's run did not finish: it answers nothing
            raise StopSearch(
                f"interrupted ({_signal_text(_RECEIVED[0])}) while trying {token} = {size}"
            )
        error = (
            report.error
            if report.error and report.error.get("type") != "OutOfMemoryError"
            else None
        )
        found = {}
        for row in rows:
            oom = row.get("oom")
            found[row["key"]] = Probe(
                size=size,
                oom=bool(oom),
                peak_allocated_bytes=row["peak_allocated_bytes"],
                peak_reserved_bytes=row["peak_reserved_bytes"],
                limit_bytes=row["capacity_bytes"] - row["context_bytes"],
                step_seconds=row.get("estimated_step_seconds"),
                error=None if oom else error,
                oom_where=f"{oom['file']}:{oom['line']}" if oom and oom.get("file") else None,
            )
        if progress:
            verdicts = ", ".join(
                f"{k}: {'fits' if p.fits(margin) else 'no'}" for k, p in found.items()
            )
            progress(f"{token} = {size}: {verdicts}")
        return found

    with signals():
        try:
            results = search(probe, low=low, high=high, margin=margin)
        except FindMaxError as e:
            raise ValueError(str(e)) from e
        return FindMax(token, results, _interrupted())


def _row(key: str, report: Any) -> dict[str, Any]:
    """The one GPU of a single run, in the shape of a ``gpu="all"`` row."""
    d = max(report.devices, key=lambda d: d.peak_reserved_bytes) if report.devices else None
    return {
        "key": key,
        "oom": report.oom,
        "peak_allocated_bytes": d.peak_allocated_bytes if d else 0,
        "peak_reserved_bytes": d.peak_reserved_bytes if d else 0,
        "capacity_bytes": d.capacity_bytes if d else 0,
        "context_bytes": d.context_bytes if d else 0,
        "estimated_step_seconds": (d.estimated_step_seconds or d.estimated_total_seconds)
        if d
        else None,
    }
