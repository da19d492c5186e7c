"""Validate the cost model on this CPU: predicted against measured training-step time.

For a few real models (an MLP in fp32 and bf16, a small CNN, a small transformer
block) the script prices one forward + backward pass with ``torchplace.cost.estimate``
from this CPU's *measured* peaks (matmul FLOP/s per dtype, copy bandwidth, per-op
overhead: ``torchplace.bench.peaks.measure_cpu_peaks``), then measures the same step
with ``torch.utils.benchmark.Timer`` (median of blocked runs) and prints predicted,
measured and measured / predicted side by side. A roofline is a lower bound, so the
ratio is expected above 1; how far above is the point of the exercise.

The estimate runs the step once on real CPU tensors, so it prices exactly the kernels
the measurement runs (on meta tensors PyTorch would pick the math attention kernel
instead of the CPU flash kernel).

Run:
    .venv/bin/python benchmarks/validate_cost_model.py           # about a minute
    .venv/bin/python benchmarks/validate_cost_model.py --quick   # about 20 s
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.benchmark import Timer

from torchplace.bench.peaks import measure_cpu_peaks
from torchplace.cost import Peaks, estimate


class _Block(nn.Module):
    """A pre-norm GPT block: causal self-attention (SDPA) and a 4x MLP."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


def _mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 1024)
    )


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(128, 10),
    )


@dataclass
class _Case:
    name: str
    model: nn.Module
    batch: torch.Tensor


def _cases(quick: bool) -> list[_Case]:
    torch.manual_seed(0)
    n = 1 if quick else 2
    mlp, img, seq = 128 * n, 32 * n, 4 * n
    bf16 = torch.bfloat16
    return [
        _Case(f"MLP 1024-4096-4096-1024, batch {mlp}, fp32", _mlp(), torch.randn(mlp, 1024)),
        _Case(
            f"MLP 1024-4096-4096-1024, batch {mlp}, bf16",
            _mlp().to(bf16),
            torch.randn(mlp, 1024, dtype=bf16),
        ),
        _Case(f"CNN 3 convs, 32x32 RGB, batch {img}, fp32", _cnn(), torch.randn(img, 3, 32, 32)),
        _Case(
            f"GPT block d=256, 4 heads, seq 256, batch {seq}, fp32",
            _Block(256, 4),
            torch.randn(seq, 256, 256),
        ),
    ]


def _step(case: _Case) -> Callable[[], None]:
    def step() -> None:
        case.model.zero_grad(set_to_none=True)  # no gradient accumulation: same ops every call
        case.model(case.batch).float().square().mean().backward()

    return step


def _measure(step: Callable[[], None], min_run_time: float) -> float:
    step()  # warm-up: allocator, oneDNN primitives
    timer = Timer(stmt="step()", globals={"step": step}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


def _fmt_s(s: float) -> str:
    return f"{s * 1e3:9.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches, shorter timing")
    args = parser.parse_args()

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{os.cpu_count()} logical CPUs, load average {load:.2f} at start"
    )
    peaks: Peaks = measure_cpu_peaks(quick=args.quick)
    f = peaks.flops_per_s
    print(
        f"CPU peaks (measured): fp32 {f['fp32'] / 1e9:.1f} GFLOP/s, bf16 {f['bf16'] / 1e9:.1f} "
        f"GFLOP/s, copy bandwidth {peaks.bandwidth_bytes_per_s / 1e9:.2f} GB/s, "
        f"{peaks.launch_seconds * 1e6:.2f} µs per op"
    )
    print(f"  ({peaks.source})\n")
    header = (
        f"{'model (forward + backward)':52} {'GFLOP':>7} {'GB':>6} {'predicted':>12} "
        f"{'measured':>12} {'meas/pred':>9}  predicted time by bound"
    )
    print(header)
    print("-" * len(header))
    ratios = []
    for case in _cases(args.quick):
        step = _step(case)
        step()
        est = estimate(step, peaks=peaks)
        measured = _measure(step, min_run_time=1.0 if args.quick else 3.0)
        ratio = measured / est.seconds
        ratios.append(ratio)
        split = ", ".join(
            f"{k} {100 * v / est.seconds:.0f}%"
            for k, v in sorted(est.total.seconds_by_bound.items(), key=lambda kv: -kv[1])
        )
        print(
            f"{case.name:52} {est.flops / 1e9:7.2f} {est.bytes / 1e9:6.2f} {_fmt_s(est.seconds)} "
            f"{_fmt_s(measured)} {ratio:8.2f}x  {split} ({est.total.ops} kernels)"
        )
    geo = torch.tensor(ratios).log().mean().exp().item()
    print(
        f"\nmeasured / predicted: {min(ratios):.2f}x to {max(ratios):.2f}x, geometric mean "
        f"{geo:.2f}x (a roofline is a lower bound: > 1 means the model is optimistic)"
    )


if __name__ == "__main__":
    main()
