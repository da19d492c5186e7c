"""Wall time of ``torchplace sim --gpu all`` (the whole catalog) against one GPU.

The script is a small training loop (a 4-layer transformer with PyTorch's fused attention,
AdamW, 3 steps), run with placeholder values. ``--gpu all`` runs it once on the largest
GPU and replays that run on every other GPU, plus one run per other kind of GPU when the
run chose an attention kernel by GPU (``torchplace.sim.plan``). Runs are interleaved
(all, one, all, one, ...) so load on the machine hits both alike; medians are printed.
Goal: ``--gpu all`` at most 1.5 × one GPU.

Run: .venv/bin/python benchmarks/bench_plan.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """
import torch
from torch import nn

layer = nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True, norm_first=True)
model = nn.Sequential(nn.Embedding(4096, 256), nn.TransformerEncoder(layer, 4),
                      nn.Linear(256, 4096)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(3):
    idx = torch.randint(4096, (16, 128), device="cuda")
    loss = nn.functional.cross_entropy(model(idx).flatten(0, 1), idx.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad()
"""


def timed(cmd: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, json.loads(r.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text(SCRIPT)
        base = [sys.executable, "-m", "torchplace", "sim", "--json", "--values", "placeholder"]
        every = [*base, "--gpu", "all", str(script)]
        one = [*base, "--gpu", "H100", str(script)]
        alls: list[float] = []
        ones: list[float] = []
        for _ in range(args.runs):
            t, report = timed(every)
            alls.append(t)
            ones.append(timed(one)[0])
    plan = report.get("plan") or {}
    a, o = statistics.median(alls), statistics.median(ones)
    print(f"runs: {args.runs} (interleaved); {len(plan.get('gpus', []))} GPUs in the table")
    print(f"simulated runs behind --gpu all: {len(plan.get('runs', []))}")
    print(f"--gpu H100   median {o:.2f} s  ({', '.join(f'{x:.2f}' for x in ones)})")
    print(f"--gpu all    median {a:.2f} s  ({', '.join(f'{x:.2f}' for x in alls)})")
    print(f"ratio        {a / o:.2f} × (goal: at most 1.5 ×)")


if __name__ == "__main__":
    main()
