"""Scale: a 70B Llama-shaped model with FSDP2 over 64 simulated H100s (issue #10).

Runs, one after the other::

    torchplace sim --gpu H100 --nproc-per-node 8 --nnodes 8 --values placeholder --json \\
        --rank 0|ends benchmarks/plan_train.py --model llama70b --strategy fsdp \\
        --batch 1 --seq 4096 --steps 2

and prints each command's wall time, the largest max RSS of any process in its tree (the
CLI and its rank children: ``os.wait4``'s ``ru_maxrss``, which on Linux covers the
descendants a process waited for) and each simulated rank's peak from ``--json``.
Goal: per-rank peak in under 60 s, host RSS under 2 GB.

Run: .venv/bin/python benchmarks/plan_scale.py [--rank 0 --rank ends] [--steps 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRAIN = Path(__file__).resolve().parent / "plan_train.py"
GOAL_SECONDS, GOAL_RSS = 60.0, 2e9


def run(rank: str, steps: int) -> tuple[float, int, list[dict]]:
    """Wall seconds, max RSS in bytes and the rank rows of one ``--rank rank`` command."""
    cmd = [sys.executable, "-m", "torchplace", "sim", "--gpu", "H100", "--json"]
    cmd += ["--nproc-per-node", "8", "--nnodes", "8", "--values", "placeholder", "--rank", rank]
    cmd += [str(TRAIN), "--model", "llama70b", "--strategy", "fsdp"]
    cmd += ["--batch", "1", "--seq", "4096", "--steps", str(steps)]
    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if child.returncode:
        raise RuntimeError(f"--rank {rank} exited {child.returncode}: {text[-500:]}")
    ranks = [r for world in json.loads(text)["ranks"] for r in world["ranks"]]
    return wall, usage.ru_maxrss * 1024, ranks  # ru_maxrss is in KiB on Linux


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rank", action="append", help="--rank of each command (default: 0, ends)")
    p.add_argument("--steps", type=int, default=2)
    args = p.parse_args()
    print(f"{os.cpu_count()} CPUs; llama70b, FSDP2, 8 × 8 H100, batch 1 × 4096, {args.steps} steps")
    print(f"{'command':12} {'wall':>8} {'max RSS':>9}  per-rank peak allocated")
    for rank in args.rank or ["0", "ends"]:
        wall, rss, rows = run(rank, args.steps)
        peaks = ", ".join(
            f"rank {r['rank']}: {r['peak_allocated_bytes'] / 2**30:.2f} GiB" for r in rows
        )
        ok = "meets" if wall < GOAL_SECONDS and rss < GOAL_RSS else "misses"
        print(
            f"--rank {rank:5} {wall:7.1f}s {rss / 1e6:7.0f}MB  {peaks}  "
            f"({ok} the goal: < {GOAL_SECONDS:.0f} s, < {GOAL_RSS / 1e9:.0f} GB)",
            flush=True,
        )


if __name__ == "__main__":
    main()
