"""Run a PyTorch script on simulated GPUs: device bugs, peak memory and out-of-memory,
transfers and synchronisations, estimated time — on a machine without a GPU.

With no SCRIPT, runs the built-in example (a tutorial-style training loop). Options go
before SCRIPT; everything after SCRIPT is passed to it. The exit code is the script's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

__all__ = ["add_arguments", "run"]

_EXAMPLE = "torchplace.sim.example"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gpu",
        default="h100-sxm-80gb",
        help="GPU model from the catalog, matched loosely (default: H100 80GB)",
    )
    parser.add_argument("--gpus", type=int, default=1, help="number of simulated GPUs (default 1)")
    parser.add_argument("--memory", help='override the capacity, e.g. "24GB" or "22.5GiB"')
    parser.add_argument("--context-size", help='override the CUDA context size, e.g. "500MiB"')
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON on stdout (the script's own output goes to stderr)",
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


def run(args: argparse.Namespace) -> int:
    if args.list_gpus:
        return _list_gpus(args.json)
    from torchplace import catalog
    from torchplace.memory import parse_size
    from torchplace.sim import SimReport, print_report

    spec = catalog.lookup(args.gpu)
    if args.gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {args.gpus}.")
    memory = parse_size(args.memory) if args.memory else None
    context = parse_size(args.context_size) if args.context_size else None
    script_args = list(args.args)
    if args.module:
        target, is_module = args.module[0], True
        script_args = args.module[1:]
    elif args.script:
        target, is_module = args.script, False
        if not os.path.isfile(target):
            raise ValueError(f"no such script: {target!r} (looked in {os.getcwd()}).")
    else:
        target, is_module = _EXAMPLE, True

    with tempfile.TemporaryDirectory(prefix="torchplace-sim-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        config_path = os.path.join(tmp, "config.json")
        with open(config_path, "w") as f:
            json.dump(
                {
                    "gpu": spec.key,
                    "gpus": args.gpus,
                    "memory": memory,
                    "context_bytes": context,
                    "target": target,
                    "module": is_module,
                    "args": script_args,
                    "report": report_path,
                },
                f,
            )
        cmd = [sys.executable, "-m", "torchplace.sim._child", config_path]
        child = subprocess.run(cmd, stdout=sys.stderr if args.json else None)
        sys.stdout.flush()
        if os.path.exists(report_path):
            with open(report_path) as f:
                report = SimReport.from_dict(json.load(f))
        else:
            report = SimReport(
                gpu={"key": spec.key, "name": spec.name, "torch_name": spec.torch_name},
                script=target,
            )
            report.error = {
                "type": "ProcessDied",
                "message": _died(child.returncode),
                "file": None,
                "line": None,
            }
    report.exit_code = child.returncode if child.returncode >= 0 else 128 - child.returncode
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print_report(report)
    return report.exit_code
