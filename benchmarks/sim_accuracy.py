"""How close is the simulator's peak memory to a real run? One training step, measured twice.

For each model (an MLP, a small CNN, a small transformer) one training step — forward,
backward, optimizer step — runs for real on the CPU under ``torch.profiler`` with
``profile_memory=True``; the peak of live tensor bytes is read from
``prof.export_memory_timeline(..., device="cpu")`` (the JSON is ``[times, sizes]``, one row
of bytes per category at each time: the peak is the largest row sum). Then the same code,
with the same model and batch moved to ``"cuda"``, runs under ``torchplace.simulate("H100")``.

What is compared, and why it is like for like:

- The simulator's peak allocated bytes count the cuBLAS workspace (32 MiB on sm90,
  allocated at the first matrix multiply); a CPU has none, so it is subtracted.
- The profiler counts the exact bytes of each tensor. The simulator's like-for-like figure
  is its peak of requested bytes (``torch.cuda.memory_stats()["requested_bytes.all.peak"]``,
  the sum of the tensors' sizes), and the verdict is on that. What a GPU would report as
  ``torch.cuda.max_memory_allocated()`` is larger, by the caching allocator's block
  granularity: every block is a multiple of 512 bytes, and a cached block is handed out
  whole when splitting it would leave less than 1 MiB (large pool) — the table shows that
  figure and its overhead too.
- Attention runs ``scaled_dot_product_attention`` with the math kernel forced on both sides
  (``sdpa_kernel(SDPBackend.MATH)``): left alone, the simulator runs the kernel an H100
  would pick (flash attention for fp16/bf16, memory-efficient for fp32), which stores far
  less than the CPU's kernels, and the comparison would measure the kernel, not the model.
- ``AdamW(foreach=True)`` and ``SGD(foreach=True)``: the CUDA default, forced on the CPU so
  both sides run the same multi-tensor updates (the CPU default is a per-parameter loop).
  AdamW's non-capturable ``step`` counters are 4-byte CPU tensors on both sides; the
  profiler counts them, the simulator (rightly) does not — a few bytes per parameter.
- Model and batch are created on the CPU before the step in both runs: the profiler sees
  them as pre-existing, the simulator as host-to-device copies.
- No dropout: on CUDA ``dropout`` runs the fused kernel (a bool mask), on the CPU it keeps
  a mask in the input's dtype, so the kernels differ.

Run:
    .venv/bin/python benchmarks/sim_accuracy.py [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile
from torch.utils.checkpoint import checkpoint

from torchplace.sim import simulate

__all__ = [
    "CASES",
    "TOLERANCE",
    "Case",
    "Result",
    "cnn_case",
    "main",
    "measure",
    "mlp_case",
    "profiler_peak",
    "simulated_peak",
    "transformer_case",
]

TOLERANCE = 0.02  # the issue's goal: within 2 % where the kernels are the same
_MIB = 1024**2


def _cublas_workspace_bytes(major: int) -> int:
    """cuBLAS's default workspace (CUBLAS_WORKSPACE_CONFIG): 32 MiB from sm90, else 8 MiB."""
    return (32 if major >= 9 else 8) * _MIB


@dataclass(frozen=True)
class Case:
    """A model, its batch and its optimizer: everything one training step needs."""

    name: str
    make_model: Callable[[], nn.Module]
    make_batch: Callable[[], tuple[Tensor, Tensor]]
    optimizer: str = "adamw"  # "adamw" or "sgd"


@dataclass(frozen=True)
class Result:
    """The two measurements of one case, in bytes."""

    name: str
    parameters: int
    profiler_peak: int  # from export_memory_timeline (the per-microsecond timeline)
    profiler_peak_raw: int  # from the raw event list (every allocation and free)
    simulator_peak: int  # requested_bytes peak minus the cuBLAS workspace (tensor bytes)
    allocated_peak: int  # max_memory_allocated minus the workspace (allocator blocks)

    @property
    def difference(self) -> float:
        """Relative difference of the simulator's peak tensor bytes to the profiler's."""
        return self.simulator_peak / self.profiler_peak - 1

    @property
    def allocator_overhead(self) -> float:
        """How much more the GPU would report as allocated than the tensors hold."""
        return self.allocated_peak / self.simulator_peak - 1


# --- the models (plain PyTorch) -------------------------------------------------------------


class _Block(nn.Module):
    """A pre-norm transformer encoder block; causal attention through SDPA."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class _Transformer(nn.Module):
    def __init__(
        self, *, vocab: int, dim: int, heads: int, layers: int, context: int, checkpoint: bool
    ) -> None:
        super().__init__()
        self.checkpoint = checkpoint
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*(_Block(dim, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: Tensor) -> Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(positions)
        for block in self.blocks:
            # activation checkpointing keeps only each block's input; backward recomputes
            x = checkpoint(block, x, use_reentrant=False) if self.checkpoint else block(x)
        return self.head(self.ln(x)).flatten(0, 1)


def _seeded(build: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        torch.manual_seed(0)
        return build()

    return make


def mlp_case(*, batch: int = 256, width: int = 2048, features: int = 512) -> Case:
    """An MLP classifier (three linear layers, ReLU), AdamW."""

    def model() -> nn.Module:
        return nn.Sequential(
            nn.Linear(features, width),
            nn.ReLU(),
            nn.Linear(width, width),
            nn.ReLU(),
            nn.Linear(width, 10),
        )

    def data() -> tuple[Tensor, Tensor]:
        g = torch.Generator().manual_seed(1)
        return torch.randn(batch, features, generator=g), torch.randint(0, 10, (batch,))

    return Case(f"MLP {features}-{width}-{width}-10, batch {batch}", _seeded(model), data)


def cnn_case(*, batch: int = 32, image: int = 32, channels: int = 32) -> Case:
    """A small CNN (conv + batchnorm + relu + max-pool, twice, then linear), SGD momentum."""

    def model() -> nn.Module:
        c = channels
        return nn.Sequential(
            nn.Conv2d(3, c, 3, padding=1),
            nn.BatchNorm2d(c),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c, 2 * c, 3, padding=1),
            nn.BatchNorm2d(2 * c),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(2 * c * (image // 4) ** 2, 10),
        )

    def data() -> tuple[Tensor, Tensor]:
        g = torch.Generator().manual_seed(1)
        return torch.randn(batch, 3, image, image, generator=g), torch.randint(0, 10, (batch,))

    return Case(f"CNN 2×(conv-bn-relu-pool), {image}², batch {batch}", _seeded(model), data, "sgd")


def transformer_case(
    *,
    batch: int = 8,
    context: int = 128,
    dim: int = 256,
    layers: int = 2,
    vocab: int = 2000,
    checkpointed: bool = False,
) -> Case:
    """A small causal transformer (embeddings, ``layers`` blocks, LM head), AdamW; with
    ``checkpointed``, each block under ``torch.utils.checkpoint`` (non-reentrant)."""

    def model() -> nn.Module:
        return _Transformer(
            vocab=vocab, dim=dim, heads=4, layers=layers, context=context, checkpoint=checkpointed
        )

    def data() -> tuple[Tensor, Tensor]:
        g = torch.Generator().manual_seed(1)
        tokens = torch.randint(0, vocab, (batch, context + 1), generator=g)
        return tokens[:, :-1].contiguous(), tokens[:, 1:].reshape(-1)

    name = f"Transformer {layers}×d{dim}, {batch}×{context} tokens"
    if checkpointed:
        name += ", activation checkpointing"
    return Case(name, _seeded(model), data)


def checkpointed_case() -> Case:
    """The transformer with activation checkpointing, 4 blocks (its peak falls the most)."""
    return transformer_case(layers=4, checkpointed=True)


CASES: dict[str, Callable[[], Case]] = {
    "mlp": mlp_case,
    "cnn": cnn_case,
    "transformer": transformer_case,
    "checkpointed": checkpointed_case,
}


# --- one training step, measured two ways ---------------------------------------------------


def _optimizer(case: Case, model: nn.Module) -> torch.optim.Optimizer:
    if case.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    return torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)


def _step(model: nn.Module, opt: torch.optim.Optimizer, x: Tensor, y: Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()


def _timeline_peaks(prof: profile) -> tuple[int, int]:
    """Peak live bytes from the memory timeline and from its raw event list."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "timeline.json")
        prof.export_memory_timeline(path, device="cpu")
        with open(path) as f:
            _times, sizes = json.load(f)
        # Raw events: (time, action, signed bytes, category), in the order they happened.
        raw_path = os.path.join(tmp, "timeline.raw.json.gz")
        prof.export_memory_timeline(raw_path, device="cpu")
        with gzip.open(raw_path, "rt") as f:
            events = json.load(f)
    live = peak_raw = 0
    for _t, _action, nbytes, _category in events:
        live += nbytes
        peak_raw = max(peak_raw, live)
    return max(sum(row) for row in sizes), peak_raw


def profiler_peak(case: Case) -> tuple[int, int]:
    """Run one step on the CPU under the profiler; its peak live bytes (timeline, raw)."""
    model = case.make_model()
    x, y = case.make_batch()
    opt = _optimizer(case, model)
    with (
        sdpa_kernel(SDPBackend.MATH),
        profile(
            activities=[ProfilerActivity.CPU],
            profile_memory=True,
            record_shapes=True,
            with_stack=True,
        ) as prof,
    ):
        _step(model, opt, x, y)
    with warnings.catch_warnings():
        # torch 2.13 marks export_memory_timeline deprecated in favour of the CUDA-only
        # memory snapshot; on the CPU it is still the profiler's way to get the timeline.
        warnings.simplefilter("ignore", FutureWarning)
        return _timeline_peaks(prof)


def simulated_peak(case: Case, *, gpu: str = "H100") -> tuple[int, int]:
    """Run one step under the simulator; its peaks (requested, allocated) less the workspace."""
    model = case.make_model()
    x, y = case.make_batch()
    with sdpa_kernel(SDPBackend.MATH), simulate(gpu) as report:
        model = model.to("cuda")
        x, y = x.to("cuda"), y.to("cuda")
        opt = _optimizer(case, model)
        _step(model, opt, x, y)
        stats = torch.cuda.memory_stats()
        workspace = _cublas_workspace_bytes(torch.cuda.get_device_capability()[0])
    if not any("cuBLAS workspace" in n["text"] for n in report.notes):
        workspace = 0  # no matrix multiply ran, so no workspace was allocated
    allocated = stats["allocated_bytes.all.peak"]
    if allocated != report.device(0).peak_allocated_bytes:
        raise RuntimeError(
            f"memory_stats() peak {allocated} B disagrees with the report's "
            f"{report.device(0).peak_allocated_bytes} B"
        )
    return stats["requested_bytes.all.peak"] - workspace, allocated - workspace


def measure(case: Case) -> Result:
    """Both measurements of ``case``."""
    timeline, raw = profiler_peak(case)
    requested, allocated = simulated_peak(case)
    params = sum(p.numel() for p in case.make_model().parameters())
    return Result(case.name, params, timeline, raw, requested, allocated)


# --- report ---------------------------------------------------------------------------------


_LEGEND = """
profiler: peak of export_memory_timeline(device='cpu') over one CPU training step, exact
  tensor bytes.
simulator: the same step under simulate('H100'): memory_stats()['requested_bytes.all.peak']
  (tensor bytes) minus the 32 MiB cuBLAS workspace; diff = simulator / profiler - 1.
  AdamW's step counters (4 B per parameter) stay on the CPU when the model is on a GPU:
  only the profiler counts them.
GPU allocated: max_memory_allocated() minus the workspace, what the GPU would report;
  blocks = its excess over the tensor bytes (512-byte blocks, unsplit cached blocks).
MiB = 1024² bytes."""


def _print_table(results: list[Result]) -> None:
    header = (
        f"{'model':<44} {'params':>7} {'profiler MiB':>13} {'simulator MiB':>14} "
        f"{'diff':>8} {'Δ bytes':>8}  {'GPU allocated MiB':>17} {'blocks':>7}  verdict"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        verdict = "within 2%" if abs(r.difference) <= TOLERANCE else "OFF BY MORE THAN 2%"
        print(
            f"{r.name:<44} {r.parameters / 1e6:>6.2f}M {r.profiler_peak / _MIB:>13.3f} "
            f"{r.simulator_peak / _MIB:>14.3f} {r.difference:>+8.3%} "
            f"{r.simulator_peak - r.profiler_peak:>+8d}  "
            f"{r.allocated_peak / _MIB:>17.3f} {r.allocator_overhead:>+7.2%}  {verdict}"
        )
    print(_LEGEND)
    for r in results:
        if r.profiler_peak != r.profiler_peak_raw:
            print(
                f"note: {r.name}: the raw event list peaks at "
                f"{r.profiler_peak_raw / _MIB:.3f} MiB (the timeline merges events within "
                "the same microsecond)"
            )


def main(argv: list[str] | None = None) -> int:
    """Measure every case (or those named) and print the table; 1 if any is off by > 2 %."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*", help=f"any of {', '.join(CASES)} (default: all)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    unknown = [name for name in args.cases if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    torch.set_num_threads(min(2, torch.get_num_threads()))
    results = [measure(CASES[name]()) for name in args.cases or CASES]
    if args.json:
        rows: list[dict[str, Any]] = [
            {**asdict(r), "difference": r.difference, "allocator_overhead": r.allocator_overhead}
            for r in results
        ]
        print(json.dumps(rows, indent=2))
    else:
        print(f"torch {torch.__version__}, simulated GPU: H100\n")
        _print_table(results)
    bad = [r for r in results if abs(r.difference) > TOLERANCE]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
