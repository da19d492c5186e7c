"""What simulating a GPU costs: one training step, bare FakeTensorMode vs the simulator.

Two models in plain PyTorch, each trained for a few steps (forward, backward, AdamW):

- GPT-2 small: 124M parameters (12 layers, d_model 768, 12 heads, vocab 50257, context
  1024, tied embeddings), fp32, batch 8 × 1024 tokens;
- a 7B Llama: 6.74B parameters (32 layers, d_model 4096, 32 heads, RoPE, RMSNorm, SwiGLU
  MLP of 11008, vocab 32000, untied head), bf16 weights (fp32 weights with AdamW need
  about 108 GB: they would not fit an 80 GB H100), batch 1 × 2048 tokens.

Each model runs twice, each time in its own subprocess (so that peak RSS is per case):

- ``fake``: the reference, a bare ``torch._subclasses.fake_tensor.FakeTensorMode()`` with
  the model and batch built inside it (fake CPU tensors: shapes only, no data, no device
  rules, no accounting);
- ``sim``: ``torchplace.simulate("H100", values="placeholder")`` (shapes only, as the
  reference: ``simulate``'s default became real values, which would compute every op on
  the CPU and hold a 7B model's weights in host memory), the model built under
  ``with torch.device("cuda"):`` and the batch created with ``device="cuda"`` — device
  labels and rules, every allocation through the caching-allocator model, the GPU's
  kernel choices, the roofline estimate of every op. The weights never exist on the host.

Both use ``AdamW(foreach=True)`` (the CUDA default; the CPU default is a per-parameter
loop, which would make the two runs do different work). The attention kernels differ
as they would: the fake CPU run takes the CPU's flash kernel, the simulator the H100's
(memory-efficient for fp32, flash for bf16).

Printed: median wall seconds per step after ``--warmup`` steps (pooled over ``--rounds``
processes per case, run alternately fake, sim, fake, sim...), the simulator/fake ratio,
the peak RSS of each subprocess (``resource.getrusage``, torch's import included), and the
simulator's peak allocated / reserved memory (GiB = 1024³ bytes) with its verdict.
Goals (issue 3): simulator ≤ 3 × the bare fake step; the 7B step in under 10 s on a
2-core machine; peak RSS under 1 GB.

Run:
    .venv/bin/python benchmarks/bench_sim.py [--steps 3] [--warmup 1] [--rounds 1]
        [--models gpt2 llama7b] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["MODELS", "GPTSmall", "Llama", "ModelSpec", "main", "run_case"]

_GIB = 1024**3
_MIB = 1024**2
_GOAL_RATIO = 3.0
_GOAL_7B_SECONDS = 10.0
_GOAL_RSS_BYTES = 10**9  # 1 GB


# --- GPT-2 small ----------------------------------------------------------------------------


class _GPTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim, dtype=dtype)
        self.qkv = nn.Linear(dim, 3 * dim, dtype=dtype)
        self.proj = nn.Linear(dim, dim, dtype=dtype)
        self.ln2 = nn.LayerNorm(dim, dtype=dtype)
        self.fc = nn.Linear(dim, 4 * dim, dtype=dtype)
        self.out = nn.Linear(4 * dim, dim, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPTSmall(nn.Module):
    """GPT-2 small as nanoGPT writes it (no dropout): 124M parameters with tied embeddings."""

    def __init__(
        self,
        *,
        vocab: int = 50257,
        context: int = 1024,
        dim: int = 768,
        heads: int = 12,
        layers: int = 12,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim, dtype=dtype)
        self.wpe = nn.Embedding(context, dim, dtype=dtype)
        self.blocks = nn.Sequential(*(_GPTBlock(dim, heads, dtype) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(dim, dtype=dtype)
        self.head = nn.Linear(dim, vocab, bias=False, dtype=dtype)
        self.head.weight = self.wte.weight

    def forward(self, idx: Tensor) -> Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln_f(self.blocks(self.wte(idx) + self.wpe(pos))))


# --- Llama ----------------------------------------------------------------------------------


class _RMSNorm(nn.Module):
    def __init__(self, dim: int, dtype: torch.dtype, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.float()  # normalised in fp32, as Llama does
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(
            x
        ) * self.weight


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class _LlamaBlock(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.heads = heads
        self.attn_norm = _RMSNorm(dim, dtype)
        self.q = nn.Linear(dim, dim, bias=False, dtype=dtype)
        self.k = nn.Linear(dim, dim, bias=False, dtype=dtype)
        self.v = nn.Linear(dim, dim, bias=False, dtype=dtype)
        self.o = nn.Linear(dim, dim, bias=False, dtype=dtype)
        self.mlp_norm = _RMSNorm(dim, dtype)
        self.gate = nn.Linear(dim, hidden, bias=False, dtype=dtype)
        self.up = nn.Linear(dim, hidden, bias=False, dtype=dtype)
        self.down = nn.Linear(hidden, dim, bias=False, dtype=dtype)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        b, t, d = x.shape
        h = self.attn_norm(x)
        q, k, v = (
            proj(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
            for proj in (self.q, self.k, self.v)
        )
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    """A Llama-shaped decoder; the defaults are Llama-2 7B's shapes (6.74B parameters)."""

    cos: Tensor
    sin: Tensor

    def __init__(
        self,
        *,
        vocab: int = 32000,
        context: int = 4096,
        dim: int = 4096,
        heads: int = 32,
        hidden: int = 11008,
        layers: int = 32,
        dtype: torch.dtype = torch.bfloat16,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, dtype=dtype)
        self.layers = nn.ModuleList(_LlamaBlock(dim, heads, hidden, dtype) for _ in range(layers))
        self.norm = _RMSNorm(dim, dtype)
        self.head = nn.Linear(dim, vocab, bias=False, dtype=dtype)
        head_dim = dim // heads
        inv_freq = 1.0 / 10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(context).float(), inv_freq).repeat(1, 2)
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)

    def forward(self, idx: Tensor) -> Tensor:
        t = idx.shape[1]
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.head(self.norm(x))


# --- the cases ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """A model to benchmark and the batch it trains on."""

    label: str
    build: Callable[[], nn.Module]
    batch: int
    tokens: int
    vocab: int


MODELS: dict[str, ModelSpec] = {
    "gpt2": ModelSpec("GPT-2 small (124M, fp32), 8×1024 tokens", GPTSmall, 8, 1024, 50257),
    "llama7b": ModelSpec("Llama 7B (6.74B, bf16), 1×2048 tokens", Llama, 1, 2048, 32000),
}


def _step(model: nn.Module, opt: torch.optim.Optimizer, idx: Tensor, targets: Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    logits = model(idx)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), targets)
    loss.backward()
    opt.step()


def run_case(key: str, mode: str, *, steps: int, warmup: int) -> dict[str, Any]:
    """Build ``MODELS[key]`` under ``mode`` ("fake" or "sim") and time its training steps."""
    spec = MODELS[key]
    report: Any = None
    context: AbstractContextManager[Any]
    if mode == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode

        context, device = FakeTensorMode(), "cpu"
    elif mode == "sim":
        from torchplace.sim import simulate

        context, device = simulate("H100", values="placeholder"), "cuda"
    else:
        raise ValueError(f"mode must be 'fake' or 'sim', got {mode!r}")

    times: list[float] = []
    cpu_times: list[float] = []  # this process's CPU time: less sensitive to a busy machine
    with context as entered:
        if mode == "sim":
            report = entered
        start = time.perf_counter()
        with torch.device(device):
            model = spec.build()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        idx = torch.randint(0, spec.vocab, (spec.batch, spec.tokens), device=device)
        targets = torch.randint(0, spec.vocab, (spec.batch * spec.tokens,), device=device)
        build_seconds = time.perf_counter() - start
        for i in range(warmup + steps):
            start, start_cpu = time.perf_counter(), time.process_time()
            _step(model, opt, idx, targets)
            if i >= warmup:
                times.append(time.perf_counter() - start)
                cpu_times.append(time.process_time() - start_cpu)
        params = sum(p.numel() for p in model.parameters())

    result: dict[str, Any] = {
        "model": key,
        "mode": mode,
        "parameters": params,
        "build_seconds": build_seconds,
        "step_seconds": times,
        "median_step_seconds": statistics.median(times),
        "cpu_step_seconds": cpu_times,
        "median_cpu_step_seconds": statistics.median(cpu_times),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if report is not None:
        dev = report.device(0)
        result |= {
            "peak_allocated_bytes": dev.peak_allocated_bytes,
            "peak_reserved_bytes": dev.peak_reserved_bytes,
            "verdict": dev.verdict,
            "estimated_h100_step_seconds": dev.estimated_step_seconds,
        }
    return result


def _run_child(key: str, mode: str, *, steps: int, warmup: int) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", key, mode]
    cmd += ["--steps", str(steps), "--warmup", str(warmup)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        return {"model": key, "mode": mode, "error": f"exit {proc.returncode}:\n{tail}"}
    data: dict[str, Any] = json.loads(lines[-1])
    return data


def _pool(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One case's rounds as one result: all timed steps, the largest RSS and peaks."""
    failed = [r for r in results if "error" in r]
    if failed:
        return failed[0]
    pooled = dict(results[-1])
    pooled["step_seconds"] = [t for r in results for t in r["step_seconds"]]
    pooled["median_step_seconds"] = statistics.median(pooled["step_seconds"])
    pooled["cpu_step_seconds"] = [t for r in results for t in r["cpu_step_seconds"]]
    pooled["median_cpu_step_seconds"] = statistics.median(pooled["cpu_step_seconds"])
    pooled["peak_rss_bytes"] = max(r["peak_rss_bytes"] for r in results)
    pooled["rounds"] = len(results)
    return pooled


# --- report ---------------------------------------------------------------------------------


def _print_table(rows: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    header = (
        f"{'model':<40} {'fake s/step':>11} {'sim s/step':>10} {'ratio':>6} {'CPU ratio':>9} "
        f"{'RSS fake MiB':>12} {'RSS sim MiB':>11} {'alloc GiB':>9} {'reserved GiB':>12}  verdict"
    )
    print(header)
    print("-" * len(header))
    for fake, sim in rows:
        label = MODELS[fake["model"]].label
        for r in (fake, sim):
            if "error" in r:
                print(f"{label:<40} {r['mode']} run failed: {r['error']}")
        if "error" in fake or "error" in sim:
            continue
        f_s, s_s = fake["median_step_seconds"], sim["median_step_seconds"]
        cpu_ratio = sim["median_cpu_step_seconds"] / fake["median_cpu_step_seconds"]
        print(
            f"{label:<40} {f_s:>11.3f} {s_s:>10.3f} {s_s / f_s:>5.2f}× {cpu_ratio:>8.2f}× "
            f"{fake['peak_rss_bytes'] / _MIB:>12.0f} {sim['peak_rss_bytes'] / _MIB:>11.0f} "
            f"{sim['peak_allocated_bytes'] / _GIB:>9.2f} {sim['peak_reserved_bytes'] / _GIB:>12.2f}"
            f"  {sim['verdict']}"
        )
    print(
        "\ns/step: median wall time of the timed steps (forward, backward, AdamW foreach); "
        "ratio = sim / fake;\nCPU ratio: the same with each process's CPU time per step "
        "(steadier on a busy machine).\nRSS: peak resident memory of the case's own process, "
        "torch import included. alloc / reserved: the\nsimulated H100's peak memory_allocated "
        "/ memory_reserved (GiB = 1024³ bytes)."
    )


def _print_goals(rows: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    done = [(f, s) for f, s in rows if "error" not in f and "error" not in s]
    if not done:
        return
    print("\nGoals:")
    for fake, sim in done:
        ratio = sim["median_step_seconds"] / fake["median_step_seconds"]
        rss = max(fake["peak_rss_bytes"], sim["peak_rss_bytes"])
        checks = [
            (f"sim ≤ {_GOAL_RATIO:g}× fake ({ratio:.2f}×)", ratio <= _GOAL_RATIO),
            (f"peak RSS < 1 GB ({rss / 1e9:.2f} GB)", rss < _GOAL_RSS_BYTES),
        ]
        if fake["model"] == "llama7b":
            seconds = sim["median_step_seconds"]
            checks.append((f"7B step < 10 s ({seconds:.2f} s)", seconds < _GOAL_7B_SECONDS))
        for text, ok in checks:
            print(f"  {fake['model']:<8} {text}: {'met' if ok else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    """Run every (model, mode) case in its own process and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--steps", type=int, default=3, help="timed steps per case")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    parser.add_argument(
        "--rounds", type=int, default=1, help="processes per case, run alternately (default 1)"
    )
    parser.add_argument("--json", action="store_true", help="print the raw results as JSON")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.rounds < 1:
        parser.error("--steps and --rounds must be >= 1, --warmup >= 0")
    if args.child:
        key, mode = args.child
        print(json.dumps(run_case(key, mode, steps=args.steps, warmup=args.warmup)))
        return 0

    rows = []
    for key in args.models:
        runs: dict[str, list[dict[str, Any]]] = {"fake": [], "sim": []}
        for _ in range(args.rounds):  # interleaved, so load from other work hits both alike
            for mode, results in runs.items():
                results.append(_run_child(key, mode, steps=args.steps, warmup=args.warmup))
        rows.append((_pool(runs["fake"]), _pool(runs["sim"])))
    if args.json:
        print(json.dumps([r for pair in rows for r in pair], indent=2))
        return 0
    print(
        f"torch {torch.__version__}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPU cores; per case {args.rounds} process(es) × ({args.warmup} "
        f"warm-up + {args.steps} timed steps)\n"
    )
    _print_table(rows)
    _print_goals(rows)
    return 1 if any("error" in r for pair in rows for r in pair) else 0


if __name__ == "__main__":
    sys.exit(main())
