"""Launch a training script with torchrun (PyTorch's DDP launcher): one process per
visible GPU, or N CPU processes with the gloo backend. Each process finds its place
(RANK, LOCAL_RANK, WORLD_SIZE) in its environment; torchplace.Runner reads it.

examples:
  torchplace run train.py --lr 0.1             one process per visible GPU (1 CPU process without)
  torchplace run --gpus 2 train.py             two GPUs
  torchplace run --procs 2 -m torchplace.demo  two CPU processes (gloo), GPUs hidden from them
  torchplace run --max-restarts 3 train.py     restart all workers when one fails
  torchplace run --nodes 2 --node-rank 0 --rdzv-endpoint host0:29400 train.py  (node 1: rank 1)
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

from torchplace._cli._target import check_module, check_script
from torchplace._devices.discovery import visible_text

__all__ = ["add_arguments", "run"]


class _UsageError(ValueError):
    """A bad command line; ``hint`` says what to type instead."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register ``torchplace run``'s options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--gpus", type=int, metavar="N", help="processes, one per GPU (default: every visible GPU)"
    )
    parser.add_argument(
        "--procs",
        type=int,
        metavar="N",
        help="N CPU processes with gloo (GPUs hidden from them); default 1 without a GPU",
    )
    parser.add_argument("--nodes", type=int, default=1, metavar="N", help="machines (default 1)")
    parser.add_argument(
        "--node-rank", type=int, metavar="R", help="this machine's rank, 0 to N-1 (static setup)"
    )
    parser.add_argument(
        "--rdzv-endpoint",
        metavar="HOST:PORT",
        help="where the machines meet: an address every node can reach (multi-node)",
    )
    parser.add_argument(
        "--rdzv-id", metavar="ID", help="a job id shared by all machines (without --node-rank)"
    )
    parser.add_argument(
        "--max-restarts",
        type=int,
        default=0,
        metavar="K",
        help="restart all workers up to K times when one fails (default 0)",
    )
    parser.add_argument(
        "-m", "--module", action="store_true", help="TARGET is a module, run like python -m"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the torchrun command and stop"
    )
    parser.add_argument("target", metavar="TARGET", help="script.py, or a module with -m")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")


def run(args: argparse.Namespace) -> int:
    """Check the command line, then run torchrun and return its exit code."""
    _check_target(args.target, module=args.module, args=list(args.args))
    command, env, note = _launch_plan(args, _visible_gpus())
    print(f"torchplace run: {note}", file=sys.stderr)
    print(f"torchplace run: {shlex.join(['python', *command[1:]])}", file=sys.stderr, flush=True)
    if args.dry_run:
        return 0
    return _run_torchrun(command, env)


def _check_target(target: str, *, module: bool, args: list[str] | None = None) -> None:
    if module:
        check_module(target, "torchplace run")
    else:
        check_script(target, "torchplace run", args)


def _launch_plan(args: argparse.Namespace, visible: int) -> tuple[list[str], dict[str, str], str]:
    """The torchrun command, its environment and a sentence that says what will start."""
    if args.gpus is not None and args.procs is not None:
        raise _UsageError(
            f"--gpus {args.gpus} and --procs {args.procs} were both given",
            "--gpus N starts one process per GPU, --procs N starts N CPU processes: use one",
        )
    for flag, value in (("--gpus", args.gpus), ("--procs", args.procs), ("--nodes", args.nodes)):
        if value is not None and value < 1:
            raise _UsageError(f"{flag} must be at least 1, got {value}", f"{flag} 1 or more")
    if args.max_restarts < 0:
        raise _UsageError(
            f"--max-restarts must be 0 or more, got {args.max_restarts}", "--max-restarts 0"
        )
    env = dict(os.environ)
    if args.gpus is not None:
        if visible == 0:
            raise _UsageError(
                f"--gpus {args.gpus} asks for GPUs, but none is visible here ({visible_text()})",
                f"use --procs {args.gpus} to run {args.gpus} CPU processes with gloo",
            )
        if args.gpus > visible:
            raise _UsageError(
                f"--gpus {args.gpus} asks for more GPUs than the {visible} visible here "
                f"({visible_text()})",
                f"use --gpus {visible} or fewer, or make more GPUs visible",
            )
        procs, note = args.gpus, f"{args.gpus} process(es), one per GPU (NCCL)"
    elif args.procs is not None:
        procs, note = args.procs, f"{args.procs} CPU process(es) (gloo)"
        if visible:
            env["CUDA_VISIBLE_DEVICES"] = ""
            note += f"; the {visible} GPU(s) are hidden from them (use --gpus for GPUs)"
    elif visible:
        procs, note = visible, f"{visible} process(es), one per visible GPU (NCCL)"
    else:
        procs, note = 1, "no GPU is visible, so 1 CPU process (gloo); --procs N starts N"
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // procs)))

    torchrun = ["--nproc-per-node", str(procs), *_rendezvous(args)]
    if args.max_restarts:
        torchrun += ["--max-restarts", str(args.max_restarts)]
        # torchrun shares its rendezvous store with the workers, and a restarted worker
        # group can read the dead group's addresses from it and fail to connect
        # (pytorch/pytorch#135712, #167288): give every attempt a fresh store.
        env.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    if args.module:
        torchrun.append("-m")
    command = [sys.executable, "-m", "torch.distributed.run", *torchrun, args.target, *args.args]
    if args.nodes > 1:
        note += f", on each of {args.nodes} machines"
    return command, env, note


def _rendezvous(args: argparse.Namespace) -> list[str]:
    """torchrun's rendezvous options: standalone on one machine, static or c10d across."""
    endpoint, node_rank = args.rdzv_endpoint, args.node_rank
    if endpoint is not None:
        host, _, port = endpoint.rpartition(":")
        if not host or not port.isdigit():
            raise _UsageError(
                f"--rdzv-endpoint {endpoint!r} is not HOST:PORT",
                "e.g. --rdzv-endpoint 10.0.0.1:29400 (an address every machine can reach)",
            )
    if args.nodes == 1:
        if node_rank not in (None, 0):
            raise _UsageError(
                f"--node-rank {node_rank} needs --nodes above {node_rank}",
                "give --nodes N with --node-rank R for 0 <= R < N",
            )
        if endpoint is None:
            if args.rdzv_id is not None:
                raise _UsageError(
                    "--rdzv-id needs --rdzv-endpoint", "give both, or neither on one machine"
                )
            return ["--standalone"]  # a private rendezvous on a free port
        return ["--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint]
    if endpoint is None:
        raise _UsageError(
            f"--nodes {args.nodes} needs --rdzv-endpoint HOST:PORT, where the machines meet",
            f"run the same command on each of the {args.nodes} machines with --rdzv-endpoint "
            "<first machine's address>:29400",
        )
    nodes = ["--nnodes", str(args.nodes)]
    if node_rank is not None:
        if not 0 <= node_rank < args.nodes:
            raise _UsageError(
                f"--node-rank {node_rank} is outside 0..{args.nodes - 1} for --nodes {args.nodes}",
                "number the machines 0 to N-1; 0 is the one at --rdzv-endpoint",
            )
        if args.rdzv_id is not None:
            raise _UsageError(
                "--rdzv-id and --node-rank were both given",
                "--node-rank numbers the machines yourself (the first one hosts the "
                "endpoint); --rdzv-id lets them meet and be numbered: use one",
            )
        return [*nodes, "--node-rank", str(node_rank), "--rdzv-backend", "static",
                "--rdzv-endpoint", endpoint]  # fmt: skip
    return [*nodes, "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
            "--rdzv-id", args.rdzv_id or "torchplace"]  # fmt: skip


def _run_torchrun(command: list[str], env: dict[str, str]) -> int:
    process = subprocess.Popen(command, env=env)
    try:
        code = process.wait()
    except KeyboardInterrupt:
        # the terminal sent SIGINT to torchrun too: let it stop its workers
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.terminate()
            process.wait()
        return 130
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as shells do


# --- seam -------------------------------------------------------------------------------


def _visible_gpus() -> int:
    from torchplace._devices import torch_build

    build = torch_build()
    if build.cuda is None and build.hip is None:
        return 0  # a CPU-only torch: no need to import it (a second or two)
    import torch

    return torch.cuda.device_count()
