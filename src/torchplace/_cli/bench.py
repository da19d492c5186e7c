"""Honest CPU-vs-accelerator timing: warmed up, synchronised, medians and IQR.

Times an elementwise a*b+c, matrix multiplies (fp32, TF32, bf16, fp16 where the device
has them), a conv2d and host<->device copies over a sweep of sizes, on the CPU and every
accelerator; compares each with the device's peak (the CPU's measured here, GPUs' from
the catalog), and gives the speed-up over the CPU with and without the copies and the
break-even size. --gpu NAME adds rows *projected* by the cost model for a catalog GPU,
also on a machine without one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        action="append",
        metavar="DEVICE",
        help="device to measure: cpu, cuda, cuda:1, ... (repeatable or comma list; "
        "default: the CPU and every accelerator present)",
    )
    parser.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="NAME",
        help="add rows projected from the catalog for this GPU, e.g. H100 "
        "(repeatable or comma list; see `torchplace sim --list-gpus`)",
    )
    parser.add_argument(
        "--op",
        action="append",
        metavar="OP",
        help="only these operations: elementwise, matmul, conv2d (repeatable or comma list)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="short sweep and timings (under 30 s on a laptop)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="also save time vs size per device, log-log (needs pip install 'torchplace[plot]')",
    )
    # for tests and impatient people: keep the first N sizes of each sweep / cap each timing
    parser.add_argument("--sizes", type=int, metavar="N", help=argparse.SUPPRESS)
    parser.add_argument("--max-run-time", type=float, metavar="SECONDS", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from torchplace.bench import report
    from torchplace.bench.suite import run_bench
    from torchplace.bench.workloads import OPS

    if args.sizes is not None and args.sizes < 1:
        raise ValueError(f"--sizes must be >= 1, got {args.sizes}.")
    if args.max_run_time is not None and args.max_run_time <= 0:
        raise ValueError(f"--max-run-time must be > 0, got {args.max_run_time}.")
    if args.plot:
        report.require_matplotlib()  # fail before minutes of measuring, not after

    show_progress = not args.json and sys.stderr.isatty()
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not show_progress,
    )
    with progress:
        task = progress.add_task("torchplace bench", total=None)

        def step(description: str, done: int, total: int) -> None:
            progress.update(task, description=description, completed=done, total=total)

        result = run_bench(
            devices=args.device,
            gpus=args.gpu,
            ops=args.op or OPS,
            quick=args.quick,
            limit=args.sizes,
            max_run_time=args.max_run_time,
            progress=step,
        )

    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        # piped output: wide enough for the tables rather than rich's default of 80 columns
        wide = not sys.stdout.isatty() and "COLUMNS" not in os.environ
        report.render(result, Console(width=150 if wide else None))
    if args.plot:
        path = report.plot(result, args.plot)
        print(f"plot saved to {path}", file=sys.stderr)
    return 0
