"""Run a PyTorch script on simulated GPUs: device bugs, peak memory and out-of-memory,
transfers and synchronisations, estimated time — on a machine without a GPU.

With no SCRIPT, runs the built-in example (a tutorial-style training loop). Options go
before SCRIPT; everything after SCRIPT is passed to it. The exit code is the script's.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
from typing import Any

from torchplace._cli._target import check_module, check_script
from torchplace.sim.planning import EXAMPLE

__all__ = ["add_arguments", "run"]


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


# simulated children running now -> when they were sent SIGTERM (empty: not yet)


def run(args: argparse.Namespace) -> int:
    if args.list_gpus:
        return _list_gpus(args.json)
    from torchplace._units import parse_size
    from torchplace.sim import planning

    _check_outputs(args)
    prices = _prices(args.price)
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
        target, is_module = planning.EXAMPLE, True
    if args.gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {args.gpus}.")
    if args.timeout is not None and args.timeout <= 0:
        raise ValueError(f"--timeout must be a positive number of seconds, got {args.timeout}.")
    script = planning.Script(
        target=target,
        args=script_args,
        module=is_module,
        values=args.values,
        gpus=args.gpus,
        memory=parse_size(args.memory) if args.memory else None,
        context_bytes=parse_size(args.context_size) if args.context_size else None,
        host_memory_limit=parse_size(args.host_memory_limit) if args.host_memory_limit else None,
        write_files=args.write_files,
        timeline=bool(args.html or args.png),
        snapshot=args.snapshot,
        timeout=args.timeout,
        stdout_to_stderr=args.json,
    )
    specs = planning.gpus(args.gpu)  # an unknown name is an error before anything runs
    if args.nproc_per_node:
        report = planning.ranks(
            script,
            nproc_per_node=_sizes(args.nproc_per_node, "--nproc-per-node"),
            nnodes=args.nnodes,
            rank=args.rank,
            gpu=args.gpu,
            network=args.network,
            prices=prices,
            progress=_progress,
        )
        _show(args, report)
        interrupted = report.interrupted and signal.Signals[report.interrupted]
        return 128 + interrupted if interrupted else report.exit_code or 0
    if args.find_max:
        return _find_max(args, script, specs)
    report = planning.run(script, gpu=[s.key for s in specs], prices=prices)
    _hint_misplaced_options(report, script)
    _hint_torchrun(report, args, script)
    _show(args, report)
    return report.exit_code or 0


def _progress(text: str) -> None:
    print(f"torchplace sim: {text}", file=sys.stderr)


def _find_max(args: argparse.Namespace, script: Any, specs: list[Any]) -> int:
    """``--find-max NAME``: the largest {NAME} that fits each GPU, then its table."""
    from torchplace.sim import planning

    found = planning.find_max(
        script,
        name=args.find_max,
        gpu=[s.key for s in specs],
        low=args.min,
        high=args.max,
        margin=_margin(args.margin),
        progress=_progress,
    )
    if args.json:
        print(json.dumps(found.to_dict(), indent=2))
    else:
        from rich.console import Console

        from torchplace.sim.report import render_find_max

        render_find_max(
            found.token,
            found.results,
            Console(highlight=False, width=None if sys.stdout.isatty() else 120),
        )
    if found.interrupted and not found.results:
        print(
            "torchplace sim: the search was interrupted before any size of "
            f"{found.token} was measured",
            file=sys.stderr,
        )
    return found.exit_code


def _hint_misplaced_options(report: Any, script: Any) -> None:
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
    rest = list(script.args)
    for token in moved:
        if token in rest:
            rest.remove(token)
    target = ["-m", script.target] if script.module else [script.target]
    if script.target == EXAMPLE:
        target = []
    command = shlex.join(["torchplace", "sim", *moved, *target, *rest])
    stopped["hint"] = f"torchplace options go before the script: {command}"


def _hint_torchrun(report: Any, args: argparse.Namespace, script: Any) -> None:
    """A script that torchrun starts reads its rank from the environment; run on its own it
    fails in init_process_group ("environment variable RANK expected"): say how to
    simulate its ranks."""
    error = report.error or {}
    message = error.get("message") or ""
    if not any(f"variable {v} expected" in message for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR")):
        return
    n = args.gpus if args.gpus > 1 else 8
    target = ["-m", script.target] if script.module else [script.target]
    command = shlex.join(["torchplace", "sim", "--nproc-per-node", str(n), *target, *script.args])
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


#: Host memory a simulated rank's process takes before its tensors: Python, torch and
#: torch.distributed (310 MiB RSS measured for an FSDP2 rank on torch 2.13), rounded up.


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
