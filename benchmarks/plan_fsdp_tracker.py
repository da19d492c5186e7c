"""Rank 0's peak of FSDP2 at 8 ranks: the simulator against torch's ``FSDPMemTracker``.

Same script, model and steps (``plan_train.py``, GPT-2-small shape, FSDP2 per block and at
the root, AdamW foreach), each side in a process of its own:

- tracker: ``torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker`` around the steps
  (``plan_train.train(around=...)``), rank 0 of ``init_process_group("fake",
  store=FakeStore(), world_size=8)``, on the CPU (this machine has no GPU). The tracker
  is a dispatch mode: it counts the storages of the tensors the ops return and frees them
  when Python drops them (weak references), by category; on a CPU it does not round;
- simulated: ``torchplace.simulate("H100", values="placeholder")`` running
  ``plan_train.main`` unchanged (cuda, nccl), rank 0 of 8 as ``torchplace sim
  --nproc-per-node 8 --rank 0`` runs it: the simulated caching allocator's peak of
  requested bytes (tensor sizes) and of allocated bytes (rounded to 512 B blocks).

Attention runs PyTorch's math kernel on both sides (the CPU's and the H100's default
kernels differ in what they save for backward).

Run: .venv/bin/python benchmarks/plan_fsdp_tracker.py [--model gpt2] [--steps 2] [--batch 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plan_train

WORLD = 8


def tracker(argv: list[str]) -> dict[str, Any]:
    """Rank 0's peak by ``FSDPMemTracker``, on the CPU, over the fake process group."""
    import torch.distributed as dist
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.testing._internal.distributed.fake_pg import FakeStore

    args = plan_train.parse([*argv, "--device", "cpu"])
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
    trackers: list[FSDPMemTracker] = []

    def around(model: torch.nn.Module, opt: torch.optim.Optimizer) -> FSDPMemTracker:
        trackers.append(FSDPMemTracker(model, opt))
        # one step's module stats at a time (the tracker refuses a second forward otherwise)
        opt.register_step_post_hook(lambda *_: trackers[0].reset_mod_stats())
        return trackers[0]

    try:
        device = torch.device("cpu")
        plan_train.train(args, plan_train.build(args, device), device, around=around)
    finally:
        dist.destroy_process_group()
    snap = trackers[0].get_tracker_snapshot("peak")[device]
    return {"peak": snap["Total"], "by": {str(k.value): v for k, v in snap.items() if k != "Total"}}


def simulated(argv: list[str]) -> dict[str, Any]:
    """Rank 0's peak on a simulated H100, as ``--nproc-per-node 8 --rank 0`` runs it."""
    from torchplace.sim import simulate

    env = dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE=str(WORLD), LOCAL_WORLD_SIZE=str(WORLD))
    os.environ.update(env, MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
    with simulate("H100", gpus=WORLD, values="placeholder") as report:
        plan_train.main(argv)
        stats = torch.cuda.memory_stats()
    workspace = 32 * 2**20 if any("cuBLAS" in n["text"] for n in report.notes) else 0
    d = report.devices[0]
    return {
        "requested": stats["requested_bytes.all.peak"],
        "allocated": stats["allocated_bytes.all.peak"],
        "workspace": workspace,
        "by": dict(d.peak_breakdown),
    }


def compare(options: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tracker's and the simulator's figures for this script's ``options``, each side
    in a fresh process (both make a process group)."""
    sides = []
    for side in ("tracker", "simulated"):
        cmd = [sys.executable, __file__, "--side", side, *options]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        sides.append(json.loads(out.strip().splitlines()[-1]))
    return sides[0], sides[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--side", choices=("tracker", "simulated"), help=argparse.SUPPRESS)
    p.add_argument("--model", choices=sorted(plan_train.CONFIGS), default="gpt2")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=64)
    args = p.parse_args()
    argv = ["--model", args.model, "--strategy", "fsdp", "--batch", str(args.batch)]
    argv += ["--seq", str(args.seq), "--steps", str(args.steps)]
    if args.side:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.MATH):
            result = tracker(argv) if args.side == "tracker" else simulated(argv)
        print(json.dumps(result))
        return
    t, s = compare(sys.argv[1:])
    mib = 2**20
    print(f"torch {torch.__version__}; FSDP2, rank 0 of {WORLD}, {' '.join(argv)}")
    print(f"FSDPMemTracker peak (CPU, unrounded)     {t['peak'] / mib:10.2f} MiB")
    for k, v in t["by"].items():
        print(f"  {k:38} {v / mib:10.2f} MiB")
    req = s["requested"] - s["workspace"]
    print(f"simulated requested peak - cuBLAS ws.    {req / mib:10.2f} MiB")
    print(f"simulated allocated peak (512 B blocks)  {s['allocated'] / mib:10.2f} MiB")
    for k, v in s["by"].items():
        print(f"  {k:38} {v / mib:10.2f} MiB")
    print(f"cuBLAS workspace in the simulated peak   {s['workspace'] / mib:10.2f} MiB")
    diff = req - t["peak"]
    print(f"requested - tracker: {diff:+,} B ({100 * diff / t['peak']:+.4f} %)")
    print(f"allocated - requested (rounding): {s['allocated'] - s['requested']:+,} B")


if __name__ == "__main__":
    main()
