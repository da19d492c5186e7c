"""Run a PyTorch script on simulated GPUs: device bugs, peak memory and out-of-memory,
transfers and synchronisations, estimated time — on a machine without a GPU.

With no SCRIPT, runs the built-in example (a tutorial-style training loop). Options go
before SCRIPT; everything after SCRIPT is passed to it. The exit code is the script's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from torchplace._cli._target import check_module, check_script

__all__ = ["add_arguments", "run"]

_EXAMPLE = "torchplace.sim.example"
_GRACE_SECONDS = 5.0  # after SIGTERM, how long the child may take to write its report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gpu",
        default="h100-sxm-80gb",
        help="GPU model from the catalog, matched loosely (default: H100 80GB); several, "
        "comma-separated, or 'all': which of them the run fits on, from one run per kind",
    )
    parser.add_argument("--gpus", type=int, default=1, help="number of simulated GPUs (default 1)")
    parser.add_argument("--memory", help='override the capacity, e.g. "24GB" or "22.5GiB"')
    parser.add_argument("--context-size", help='override the CUDA context size, e.g. "500MiB"')
    parser.add_argument(
        "--values",
        choices=("auto", "real", "placeholder"),
        default="auto",
        help="real: simulated tensors hold real values computed on the CPU; placeholder: "
        "shapes only, any model size; auto (default): real values where they fit in host "
        "memory, placeholders where they would not, decided in one run (the report says "
        "which ran, why, and from which line values are placeholders)",
    )
    parser.add_argument(
        "--host-memory-limit",
        help='with real values, the most host memory simulated tensors may take, e.g. "8GiB" '
        "(default: half the memory available)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON on stdout (the script's own output goes to stderr)",
    )
    parser.add_argument(
        "--html",
        metavar="FILE.html",
        help="also write the report as one self-contained HTML page: the memory timeline of "
        "each GPU, what was live at the peak, transfers and syncs by line, the time estimate",
    )
    parser.add_argument(
        "--snapshot",
        metavar="FILE.pickle",
        help="also write the run as a CUDA memory snapshot, as torch.cuda.memory._dump_snapshot "
        "does: python -m torch.cuda._memory_viz trace_plot FILE.pickle -o trace.html opens it",
    )
    parser.add_argument(
        "--png",
        metavar="FILE.png",
        help="also save the memory timeline as a picture (needs pip install 'torchplace[plot]')",
    )
    parser.add_argument(
        "--write-files",
        action="store_true",
        help="let every torch.save of simulated tensors write where the script says; by "
        "default a file that would replace one the run did not create, or that holds "
        "placeholder values, goes to a scratch folder the report names (docs/sim.md)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop the script after this long and report what it did until then",
    )
    parser.add_argument(
        "--nproc-per-node",
        metavar="N[,N...]",
        help="run the script as torchrun would start it, N processes per node (DDP, FSDP, "
        "DeviceMesh), and simulate ranks 0 and the last: per-rank memory and time; several "
        "values sweep world sizes (1,2,4,8)",
    )
    parser.add_argument(
        "--nnodes", type=int, default=1, help="with --nproc-per-node: the number of nodes"
    )
    parser.add_argument(
        "--rank",
        default="ends",
        help="with --nproc-per-node: the ranks to simulate: 'ends' (0 and the last, where "
        "the work of ranks can differ; default), 'all', or a list such as 0,3",
    )
    parser.add_argument(
        "--network",
        help="with --nnodes > 1: the network between nodes (a name from the catalog's "
        "networks, e.g. ib-ndr-400, the default)",
    )
    parser.add_argument(
        "--find-max",
        metavar="NAME",
        help="find the largest value of {NAME} (written in the script's arguments or an "
        "environment variable, e.g. --batch-size {BATCH}) that fits: doubling, then bisection",
    )
    parser.add_argument("--min", type=int, default=1, help="with --find-max: the first size")
    parser.add_argument("--max", type=int, help="with --find-max: the largest size to try")
    parser.add_argument(
        "--margin",
        default="5%",
        help="with --find-max: memory to keep free, of what the allocator can reserve "
        "(default 5%%)",
    )
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="GPU=USD_PER_HOUR",
        help="the hourly price of one GPU (repeatable, e.g. --price H100=2.49 --price "
        "A100=1.29): the report adds the cost of 1,000 steps, and --gpu all sorts by it. "
        "No prices are built in (they change too often)",
    )
    parser.add_argument("--list-gpus", action="store_true", help="print the GPU catalog and exit")
    parser.add_argument(
        "-m",
        dest="module",
        nargs=argparse.REMAINDER,
        metavar="MODULE ...",
        help="run a module like python -m; what follows goes to it",
    )
    parser.add_argument("script", nargs="?", help="the script to run (default: built-in example)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")


def _list_gpus(as_json: bool) -> int:
    from rich.console import Console
    from rich.table import Table

    from torchplace import catalog

    specs = catalog.gpus()
    if as_json:
        print(json.dumps([s.to_dict() for s in specs], indent=2))
        return 0
    table = Table(
        title="GPU catalog (dense peaks; memory as torch reports it, GiB = 1024³ B)",
        title_justify="left",
    )
    for col in (
        "key",
        "torch name",
        "memory",
        "TB/s",
        "bf16 TFLOP/s",
        "fp32 TFLOP/s",
        "CC",
        "host link",
    ):
        table.add_column(col, justify="right" if "/" in col or col == "memory" else "left")
    for s in specs:
        bf16 = s.peak_flops.get("bf16")
        cc = ".".join(map(str, s.compute_capability)) if s.compute_capability else s.gcn_arch
        table.add_row(
            s.key,
            s.torch_name,
            f"{s.torch_total_bytes / 1024**3:.2f} GiB",
            f"{s.bandwidth_bytes_per_s / 1e12:.2f}",
            f"{bf16 / 1e12:.0f}" if bf16 else "—",
            f"{s.peak_flops['fp32'] / 1e12:.1f}" if "fp32" in s.peak_flops else "—",
            cc or "—",
            s.host_link,
        )
    Console(highlight=False, width=None if sys.stdout.isatty() else 160).print(table)
    print("Sources for every figure: torchplace/data/gpus.toml")
    return 0


def _died(rc: int) -> str:
    name = signal.Signals(-rc).name if rc < 0 and -rc in signal.valid_signals() else str(rc)
    return (
        f"the simulated process died ({name}) before it could report; some torch builds "
        "abort the process on CUDA paths without a driver — run the script under "
        "`python -X faulthandler` to see where"
    )


def _run_child(
    config: dict[str, Any], *, quiet_stdout: bool, timeout: float | None, silent: bool = False
) -> int:
    """Run the child in its own process group and wait for it. Ctrl-C and SIGTERM reach it
    through :func:`_forward` (a terminal sends them to the foreground group: this process);
    past ``timeout`` it gets SIGTERM, which it turns into an error it reports; a child that
    has not stopped ``_GRACE_SECONDS`` after a SIGTERM is killed."""
    if _RECEIVED:  # interrupted before this run could start: do not start it
        config["interrupted"], config["not_started"] = _RECEIVED[0], True
        return 128 + _RECEIVED[0]
    cmd = [sys.executable, "-m", "torchplace.sim._child", config["config_path"]]
    out: Any = subprocess.DEVNULL if silent else (sys.stderr if quiet_stdout else None)
    # a simulation of its own, even when this command runs inside one (a simulated script
    # that calls torchplace sim): not the one torchplace.sim._processes.ENV names
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
    deadline = None if timeout is None else time.monotonic() + timeout
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
            if stopping and now > stopping[0] + _GRACE_SECONDS:
                _signal_group(child, stopping, signal.SIGKILL)
    finally:
        del _LIVE[child]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)  # anything the script left running
    if _RECEIVED:
        config["interrupted"] = _RECEIVED[0]
    return code


# simulated children running now -> when they were sent SIGTERM (empty: not yet)
_LIVE: dict[subprocess.Popen[bytes], list[float]] = {}
_RECEIVED: list[int] = []  # SIGINT / SIGTERM received by this command, in order


def _stop_all(*_: object, how: int = signal.SIGKILL) -> None:
    """Stop every simulated child now running (``how=SIGTERM`` lets each write its report)."""
    for child, stopping in list(_LIVE.items()):
        _signal_group(child, stopping, how)


def _signal_group(child: subprocess.Popen[bytes], stopping: list[float], signum: int) -> None:
    if signum == signal.SIGTERM and not stopping:
        stopping.append(time.monotonic())
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signum)


def _forward(signum: int, frame: object = None) -> None:
    """SIGINT or SIGTERM to this command: pass it on to every simulated child. The first
    Ctrl-C reaches the script as Ctrl-C (KeyboardInterrupt, its handlers run); a second
    one, or SIGTERM, stops it (then SIGKILL after ``_GRACE_SECONDS``)."""
    _RECEIVED.append(signum)
    stop = signum == signal.SIGTERM or _RECEIVED.count(signal.SIGINT) > 1
    for child, stopping in list(_LIVE.items()):
        _signal_group(child, stopping, signal.SIGTERM if stop else signal.SIGINT)


@contextlib.contextmanager
def _signals() -> Iterator[None]:
    """Handle SIGINT and SIGTERM with :func:`_forward` while the command runs."""
    _RECEIVED.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _interrupted_code() -> int | None:
    """The exit code of a command stopped by a signal: 130 (SIGINT), 143 (SIGTERM)."""
    if not _RECEIVED:
        return None
    return 128 + (signal.SIGTERM if signal.SIGTERM in _RECEIVED else signal.SIGINT)


def _gpus(text: str) -> list[Any]:
    """``--gpu``: one GPU, several (``A100,H100``) or ``all`` of the catalog."""
    from torchplace import catalog

    if text.strip().lower() == "all":
        return list(catalog.gpus())
    specs = [catalog.lookup(part) for part in text.split(",") if part.strip()]
    if not specs:
        raise ValueError(f"--gpu names no GPU: {text!r}; give a catalog name, a list, or all.")
    return list({s.key: s for s in specs}.values())


def run(args: argparse.Namespace) -> int:
    if args.list_gpus:
        return _list_gpus(args.json)
    from torchplace._units import parse_size

    _check_outputs(args)
    prices = _prices(args.price)
    specs = _gpus(args.gpu)
    if args.gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {args.gpus}.")
    if args.timeout is not None and args.timeout <= 0:
        raise ValueError(f"--timeout must be a positive number of seconds, got {args.timeout}.")
    options = {
        "gpus": args.gpus,
        "memory": parse_size(args.memory) if args.memory else None,
        "context_bytes": parse_size(args.context_size) if args.context_size else None,
        "host_memory_limit": parse_size(args.host_memory_limit) if args.host_memory_limit else None,
        "write_files": args.write_files,
        "timeline": bool(args.html or args.png),
        "snapshot": os.path.abspath(args.snapshot) if args.snapshot else None,
    }
    script_args = list(args.args)
    if args.module:
        target, is_module = args.module[0], True
        script_args = args.module[1:]
        check_module(target, "torchplace sim")
    elif args.script:
        target, is_module = args.script, False
        check_script(target, "torchplace sim", script_args)
        _check_syntax(target)
    else:
        target, is_module = _EXAMPLE, True
    options.update(target=target, module=is_module, args=script_args)
    with _signals():
        if args.nproc_per_node:
            return _ranks(args, specs, options)
        if args.find_max:
            return _find_max(args, specs, options)
        if len(specs) == 1:
            _, report = _simulate(args, specs[0], None, options)
        else:
            report = _plan(args, specs, options)
        if prices:
            _add_costs(report, prices)
        _hint_misplaced_options(report, options)
        _hint_torchrun(report, args, options)
        _show(args, report)
        return report.exit_code or 0


def _hint_misplaced_options(report: Any, options: dict[str, Any]) -> None:
    """A script that stopped with argparse's "unrecognized arguments" naming options of
    torchplace sim was given them by mistake: they go before the script."""
    stopped = report.stopped_at or {}
    last = stopped.get("last_output") or ""
    marker = "error: unrecognized arguments:"
    if report.exit_code != 2 or marker not in last:
        return
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    takes_value = {
        flag: action.nargs != 0
        for action in parser._actions  # argparse keeps no public list of its options
        for flag in action.option_strings
    }
    tokens = last.split(marker, 1)[1].split()
    moved: list[str] = []
    for i, token in enumerate(tokens):
        flag = token.split("=", 1)[0]
        if flag in takes_value and flag not in ("-h", "--help", "-m"):
            moved.append(token)
            if takes_value[flag] and "=" not in token and i + 1 < len(tokens):
                moved.append(tokens[i + 1])
    if not moved:
        return
    rest = list(options["args"])
    for token in moved:
        if token in rest:
            rest.remove(token)
    target = ["-m", options["target"]] if options["module"] else [options["target"]]
    if options["target"] == _EXAMPLE:
        target = []
    command = shlex.join(["torchplace", "sim", *moved, *target, *rest])
    stopped["hint"] = f"torchplace options go before the script: {command}"


def _hint_torchrun(report: Any, args: argparse.Namespace, options: dict[str, Any]) -> None:
    """A script that torchrun starts reads its rank from the environment; run on its own it
    fails in init_process_group ("environment variable RANK expected"): say how to
    simulate its ranks."""
    error = report.error or {}
    message = error.get("message") or ""
    if not any(f"variable {v} expected" in message for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR")):
        return
    n = args.gpus if args.gpus > 1 else 8
    target = ["-m", options["target"]] if options["module"] else [options["target"]]
    command = shlex.join(
        ["torchplace", "sim", "--nproc-per-node", str(n), *target, *options["args"]]
    )
    error["hint"] = (
        "this script expects torchrun to start it (it reads RANK and WORLD_SIZE from the "
        f"environment); simulate its ranks as torchrun would: {command}"
    )


def _prices(texts: list[str]) -> dict[str, float]:
    """``--price GPU=USD_PER_HOUR``, each GPU by its catalog key."""
    from torchplace import catalog

    prices: dict[str, float] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        try:
            usd = float(value) if sep else -1.0
        except ValueError:
            usd = -1.0
        if not sep or not name.strip() or not usd > 0 or usd == float("inf"):
            raise ValueError(
                f"--price takes GPU=USD_PER_HOUR with a positive price, e.g. --price H100=2.49; "
                f"got {text!r}."
            )
        prices[catalog.lookup(name.strip()).key] = usd
    return prices


def _add_costs(report: Any, prices: dict[str, float]) -> None:
    """The cost of 1,000 steps at the given hourly prices, per GPU model of the report (one
    step on ``n`` GPUs costs ``n`` GPU-hours' worth of its time)."""
    rows = (report.plan or {}).get("gpus") or [
        {"key": report.gpu.get("key"), "devices": len(report.devices),
         "estimated_step_seconds": max((d.estimated_step_seconds or 0.0 for d in report.devices),
                                       default=0.0) or None}
    ]  # fmt: skip
    costs = {}
    for row in rows:
        price, step = prices.get(row["key"]), row.get("estimated_step_seconds")
        if price is not None and step and not row.get("oom"):
            costs[row["key"]] = step * 1000 / 3600 * price * row.get("devices", 1)
    unknown = sorted(set(prices) - {row["key"] for row in rows})
    report.costs = {
        "usd_per_hour": prices,
        "usd_per_1000_steps": costs,
        "not_simulated": unknown,
    }


def _check_outputs(args: argparse.Namespace) -> None:
    """Output files are checked before the script runs, not after a long simulation."""
    from torchplace._output import check_writable

    outputs = {"--html": args.html, "--snapshot": args.snapshot, "--png": args.png}
    given = [flag for flag, path in outputs.items() if path]
    if given and args.find_max:
        raise ValueError(
            f"{given[0]} is not available with --find-max (it runs the script many times); "
            "run torchplace sim again at the size it finds, with " + given[0] + "."
        )
    for flag in given:
        check_writable(outputs[flag], flag)
    if args.png:
        from torchplace.bench.report import require_matplotlib

        require_matplotlib()


def _show(args: argparse.Namespace, report: Any) -> None:
    """Print the report (tables, or JSON on stdout) and write the files asked for."""
    from torchplace.sim.report import print_report

    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print_report(report)
    if args.html:
        from torchplace.sim.html import write_html

        write_html(report, args.html)
        print(f"torchplace sim: HTML report written to {args.html}", file=sys.stderr)
    if args.png:
        from torchplace.sim.timeline import plot

        plot(report, args.png)
        print(f"torchplace sim: memory timeline saved to {args.png}", file=sys.stderr)
    if args.snapshot and os.path.exists(args.snapshot):
        print(
            f"torchplace sim: memory snapshot written to {args.snapshot}; view it with "
            f"python -m torch.cuda._memory_viz trace_plot {args.snapshot} -o trace.html",
            file=sys.stderr,
        )


def _sizes(text: str, flag: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(n < 1 for n in sizes):
        raise ValueError(f"{flag} takes whole numbers >= 1, separated by commas; got {text!r}.")
    return sizes


def _rank_list(text: str, world: int) -> list[int]:
    if text == "ends":
        return sorted({0, world - 1})
    if text == "all":
        return list(range(world))
    try:
        ranks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        ranks = []
    if not ranks:
        raise ValueError(f"--rank takes 'ends', 'all' or rank numbers such as 0,3; got {text!r}.")
    bad = [r for r in ranks if not 0 <= r < world]
    if bad:
        raise ValueError(f"--rank {bad[0]} is not a rank of a world of {world} processes.")
    return ranks


#: Host memory a simulated rank's process takes before its tensors: Python, torch and
#: torch.distributed (310 MiB RSS measured for an FSDP2 rank on torch 2.13), rounded up.
_RANK_PROCESS_BYTES = 384 * 2**20


def _ranks(args: argparse.Namespace, specs: list[Any], options: dict[str, Any]) -> int:
    """``--nproc-per-node``: simulate the ranks of a torchrun world, one child per rank.

    With real values (``auto`` when the data fits) every rank of a world runs at once and
    the simulated NCCL is gloo, so collectives move the ranks' real data (torch's own DDP
    and FSDP code computes real numbers); each rank gets an equal share of the host memory
    limit. With placeholders (asked for, or when the ranks would not fit) only the ranks
    shown run, each alone under torch's fake process group.
    """
    if len(specs) != 1:
        raise ValueError("--nproc-per-node simulates one GPU model; give one --gpu.")
    if args.nnodes < 1:
        raise ValueError(f"--nnodes must be at least 1, got {args.nnodes}.")
    worlds = []
    for per_node in _sizes(args.nproc_per_node, "--nproc-per-node"):
        world = per_node * args.nnodes
        worlds.append((per_node, world, _rank_list(args.rank, world)))
    sweep: list[dict[str, Any]] = []
    first: Any = None
    notes: list[str] = []
    try:
        for per_node, world, ranks in worlds:
            reports, note = _world(args, specs[0], options, per_node, world, ranks, first is None)
            notes += [note] if note else []
            sweep.append(
                {
                    "nproc_per_node": per_node,
                    "nnodes": args.nnodes,
                    "world": world,
                    "values": reports[ranks[0]].values,
                    "ranks": [_rank_row(r, r % per_node, reports[r]) for r in ranks],
                }
            )
            first = first or reports[ranks[0]]
    finally:
        _stop_all()
    first.ranks = sweep
    for note in notes:
        first.notes.insert(0, {"text": note, "count": 1})
    _show(args, first)
    return _interrupted_code() or first.exit_code or 0


def _world(
    args: argparse.Namespace,
    spec: Any,
    options: dict[str, Any],
    per_node: int,
    world: int,
    ranks: list[int],
    output: bool,
) -> tuple[dict[int, Any], str | None]:
    """One world of ``world`` processes: the reports of the ranks run (by rank), and a note
    when its values are not what was asked for."""
    if args.values == "placeholder":
        return _ranks_alone(args, spec, options, per_node, world, ranks, output), None
    from torchplace._units import format_bytes
    from torchplace.sim._simulate import _host_memory_limit

    total = options.get("host_memory_limit") or _host_memory_limit()
    share = total // world - _RANK_PROCESS_BYTES if total else None  # None: unknown
    if share is not None and share <= 0:
        why = (
            f"{world} rank processes need about {format_bytes(world * _RANK_PROCESS_BYTES)} "
            f"of host memory before any data, more than the {format_bytes(total or 0)} "
            "allowed (half the memory available; --host-memory-limit sets it)"
        )
        if args.values == "real":
            raise ValueError(f"--values real: {why}. Simulate with --values placeholder.")
        note = f"values: placeholder for the {world}-rank world — {why}"
        return _ranks_alone(args, spec, options, per_node, world, ranks, output), note
    every = _ranks_together(args, spec, options, per_node, world, ranks, output, share)
    error = next((r.error for r in every.values() if _host_full(r.error)), None)
    if error is None or args.values == "real":
        return {r: every[r] for r in ranks}, None
    where = f" (at {error['file']}:{error['line']})" if error.get("file") else ""
    note = (
        f"values: placeholder for the {world}-rank world — the run was repeated with "
        f"placeholder values because the real values of {world} ranks would not fit in host "
        f"memory{where}; values read back are zeros"
    )
    print(f"torchplace sim: {note}", file=sys.stderr)
    return _ranks_alone(args, spec, options, per_node, world, ranks, output), note


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


def _rank_options(
    args: argparse.Namespace, options: dict[str, Any], env: dict[str, str], first: bool
) -> dict[str, Any]:
    per_node = int(env["LOCAL_WORLD_SIZE"])
    run = {**options, "gpus": per_node, "nodes": args.nnodes, "network": args.network}
    run["env"] = env
    if not first:
        run["snapshot"] = None  # --snapshot: the first rank simulated
    return run


def _ranks_alone(
    args: argparse.Namespace,
    spec: Any,
    options: dict[str, Any],
    per_node: int,
    world: int,
    ranks: list[int],
    output: bool,
) -> dict[int, Any]:
    """Placeholder values: each rank shown runs alone under torch's fake process group,
    as many at once as there are CPUs."""
    quiet = argparse.Namespace(**{**vars(args), "values": "placeholder"})

    def simulate_rank(i: int) -> Any:
        env = _rank_env(ranks[i], per_node, world, 29500)
        run = _rank_options(args, options, env, output and i == 0)
        return _simulate(quiet, spec, None, run, output=output and i == 0)[1]

    workers = max(1, min(len(ranks), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        return dict(zip(ranks, pool.map(simulate_rank, range(len(ranks))), strict=True))


def _ranks_together(
    args: argparse.Namespace,
    spec: Any,
    options: dict[str, Any],
    per_node: int,
    world: int,
    ranks: list[int],
    output: bool,
    share: int | None,
) -> dict[int, Any]:
    """Real values: all ``world`` ranks at once, over gloo, each with ``share`` bytes of
    host memory for its data; every rank's report. As torchrun does, the first rank to fail
    stops the others (they could wait forever in a collective); their reports say so."""
    quiet = argparse.Namespace(**{**vars(args), "values": "real"})
    port = _free_port()
    failed: list[tuple[float, int, Any]] = []
    lock = threading.Lock()

    def simulate_rank(rank: int) -> Any:
        shown = output and rank == ranks[0]
        run = _rank_options(args, options, _rank_env(rank, per_node, world, port), shown)
        run["host_memory_limit"] = share
        report = _simulate(quiet, spec, None, run, output=shown)[1]
        if report.exit_code:
            with lock:
                if not failed:  # the other ranks write their reports and stop
                    _stop_all(how=signal.SIGTERM)
                failed.append((time.monotonic(), rank, report))
        return report

    # torchrun sets OMP_NUM_THREADS=1 for more than one process per node unless it is set
    # (torch/distributed/run.py); OpenMP reads it when a process starts, so the children
    # inherit it from here
    one_thread = "OMP_NUM_THREADS" not in os.environ and per_node > 1
    if one_thread:
        os.environ["OMP_NUM_THREADS"] = "1"
    try:
        with ThreadPoolExecutor(world) as pool:  # every rank at once: they wait for each other
            reports = dict(zip(range(world), pool.map(simulate_rank, range(world)), strict=True))
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
    if used < len(report.timelines):  # --html / --png
        row["timeline"] = report.timelines[used]
    return row


def _margin(text: str) -> float:
    value = text.strip()
    try:
        margin = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        margin = -1.0
    if not 0 <= margin <= 0.5:
        raise ValueError(
            f"--margin must be a fraction or a percentage from 0 to 50%, got {text!r}."
        )
    return margin


def _find_max(args: argparse.Namespace, specs: list[Any], options: dict[str, Any]) -> int:
    """``--find-max NAME``: the largest {NAME} that fits each GPU (torchplace.sim.search)."""
    from torchplace.sim.search import FindMaxError, Probe, StopSearch, search

    token = "{" + args.find_max + "}"
    env_keys = [k for k, v in os.environ.items() if token in v]
    if not any(token in a for a in options["args"]) and not env_keys:
        raise ValueError(
            f"--find-max {args.find_max}: {token} appears in no argument of the script and in "
            f"no environment variable; write it where the size goes, e.g. "
            f"torchplace sim --find-max {args.find_max} train.py --batch-size {token}"
        )
    margin = _margin(args.margin)
    values = args.values if args.values != "auto" else "placeholder"
    quiet = argparse.Namespace(**{**vars(args), "values": values, "json": True})
    saved_env = {k: os.environ[k] for k in env_keys}

    def probe(size: int) -> dict[str, Probe]:
        run_options = {**options, "args": [a.replace(token, str(size)) for a in options["args"]]}
        for k, v in saved_env.items():
            os.environ[k] = v.replace(token, str(size))
        try:
            if len(specs) == 1:
                _, report = _simulate(quiet, specs[0], None, run_options, output=False)
                rows = [_row(specs[0].key, report)]
            else:
                report = _plan(quiet, specs, run_options, output=False)
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
        verdicts = ", ".join(f"{k}: {'fits' if p.fits(margin) else 'no'}" for k, p in found.items())
        print(f"torchplace sim: {token} = {size}: {verdicts}", file=sys.stderr)
        return found

    try:
        results = search(probe, low=args.min, high=args.max, margin=margin)
    except FindMaxError as e:
        raise ValueError(str(e)) from e
    stopped = _interrupted_code()
    if args.json:
        found: dict[str, Any] = {
            "schema_version": 1,
            "find_max": {k: r.to_dict() for k, r in results.items()},
        }
        if stopped:
            found["stopped"] = f"interrupted: exit code {stopped}"
        print(json.dumps(found, indent=2))
    else:
        from rich.console import Console

        from torchplace.sim.report import render_find_max

        render_find_max(
            token, results, Console(highlight=False, width=None if sys.stdout.isatty() else 120)
        )
    if stopped and not results:
        print(
            f"torchplace sim: the search was interrupted before any size of {token} was measured",
            file=sys.stderr,
        )
    return stopped or 0


def _row(key: str, report: Any) -> dict[str, Any]:
    """The one GPU of a single run, in the shape of a --gpu all row."""
    d = max(report.devices, key=lambda d: d.peak_reserved_bytes) if report.devices else None
    oom = report.oom
    return {
        "key": key,
        "oom": oom,
        "peak_allocated_bytes": d.peak_allocated_bytes if d else 0,
        "peak_reserved_bytes": d.peak_reserved_bytes if d else 0,
        "capacity_bytes": d.capacity_bytes if d else 0,
        "context_bytes": d.context_bytes if d else 0,
        "estimated_step_seconds": (d.estimated_step_seconds or d.estimated_total_seconds)
        if d
        else None,
    }


def _plan(
    args: argparse.Namespace, specs: list[Any], options: dict[str, Any], *, output: bool = True
) -> Any:
    """Several GPUs: one run on the largest, replayed on all; when the run made a choice
    that depends on the GPU (the attention kernel), one more run per other kind of GPU."""
    from torchplace.sim import plan

    groups = plan.classes(specs)
    first = max(groups, key=lambda g: g[0].torch_total_bytes)
    _, report = _simulate(args, first[0], specs, options, output=output)
    rows = {g["key"]: g for g in (report.plan or {}).get("gpus", [])}
    runs = [{"gpu": first[0].key, "class": [s.key for s in specs]}]
    kernel_choice = any("attention kernel" in d for d in report.decisions)
    for group in groups if kernel_choice else []:
        if _RECEIVED:
            break  # interrupted: the rows of the runs made so far
        if group is first:
            runs[0]["class"] = [s.key for s in group]
            continue
        only_first = {**options, "snapshot": None}  # --snapshot: the first run
        _, other = _simulate(args, group[0], group, only_first, output=output)
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


def _simulate(
    args: argparse.Namespace,
    spec: Any,
    plan_gpus: list[Any] | None,
    options: dict[str, Any],
    *,
    output: bool = True,
) -> tuple[int, Any]:
    """Run the script once on ``spec`` (its report replayed on ``plan_gpus``). With
    ``--values auto`` the child decides, once, in the same run (torchplace.sim._values):
    the script runs once, its output and files made once."""
    from torchplace.sim.report import SimReport

    with tempfile.TemporaryDirectory(prefix="torchplace-sim-") as tmp:
        config: dict[str, Any] = {
            **options,
            "gpu": spec.key,
            "values": args.values,
            "plan_gpus": [s.key for s in plan_gpus] if plan_gpus else None,
            "env": options.get("env", {}),
            "report": os.path.join(tmp, "report.json"),
            "config_path": os.path.join(tmp, "config.json"),
        }
        with open(config["config_path"], "w") as f:
            json.dump(config, f)
        rc = _run_child(config, quiet_stdout=args.json, timeout=args.timeout, silent=not output)
        sys.stdout.flush()
        if os.path.exists(config["report"]):
            with open(config["report"]) as f:
                report = SimReport.from_dict(json.load(f))
        else:
            report = SimReport(
                gpu={"key": spec.key, "name": spec.name, "torch_name": spec.torch_name},
                script=options["target"],
                values=args.values,
            )
            report.error = {
                "type": "ProcessDied",
                "message": _died(rc),
                "file": None,
                "line": None,
            }
            if config.get("interrupted"):
                report.error.update(
                    _not_finished(config["interrupted"], started=not config.get("not_started"))
                )
    if config.get("timed_out"):
        report.error = {
            "type": "Timeout",
            "message": f"the run was stopped after {args.timeout:g} s (--timeout)",
            "file": (report.error or {}).get("file"),
            "line": (report.error or {}).get("line"),
        }
    report.exit_code = rc if rc >= 0 else 128 - rc
    if config.get("interrupted"):
        report.interrupted = signal.Signals(config["interrupted"]).name
        if rc < 0:  # killed after the grace period
            report.exit_code = 128 + config["interrupted"]
    return report.exit_code, report


def _not_finished(signum: int, *, started: bool) -> dict[str, Any]:
    """The error of a run that a signal stopped before it could write its report."""
    what = _signal_text(signum)
    if not started:
        message = f"not run: torchplace sim was stopped ({what}) before this run started"
    else:
        message = (
            f"the script was stopped ({what}) and did not exit within {_GRACE_SECONDS:g} s "
            "of SIGTERM, so it was killed before it could report"
        )
    return {"type": "Interrupted" if signum == signal.SIGINT else "Terminated", "message": message}


def _signal_text(signum: int) -> str:
    return "Ctrl-C, SIGINT" if signum == signal.SIGINT else signal.Signals(signum).name


def _check_syntax(path: str) -> None:
    """A script that does not parse is reported as Python reports it, before anything runs."""
    with open(path, "rb") as f:
        source = f.read()
    try:
        compile(source, path, "exec")
    except SyntaxError as e:
        import traceback

        sys.stderr.write("".join(traceback.format_exception_only(e)))
        raise SystemExit(1) from None
