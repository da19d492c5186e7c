"""A training script written for torchrun, as people write them: DDP or FSDP2 on CUDA.

Used by ``plan_accuracy.py``, ``plan_scale.py``, ``plan_fsdp_tracker.py`` and
``bench_plan.py``, and by hand::

    torchplace sim --nproc-per-node 8 --nnodes 8 --values placeholder \\
        benchmarks/plan_train.py --model llama70b --strategy fsdp

Reads RANK / WORLD_SIZE / LOCAL_RANK, makes the NCCL process group and a DeviceMesh,
builds the model on the meta device (FSDP: each rank then materialises only its shards),
and runs ``--steps`` AdamW steps on random tokens. ``--device cpu --backend gloo`` runs it
for real on the CPU (``plan_accuracy.py``). Models are plain ``torch.nn``:

- ``tiny``: 2 layers, width 64 (tests);
- ``gpt2``: GPT-2 small's shape (12 layers, width 768, 12 heads, vocabulary 50257);
- ``llama70b``: Llama-3-70B's shape (80 layers, width 8192, 64 heads with 8 key/value
  heads, MLP 28672, vocabulary 128256), bf16, activation checkpointing per layer.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class Config:
    layers: int
    dim: int
    heads: int
    kv_heads: int
    hidden: int
    vocab: int
    dtype: torch.dtype = torch.float32
    checkpoint: bool = False


CONFIGS = {
    "tiny": Config(layers=2, dim=64, heads=4, kv_heads=4, hidden=256, vocab=512),
    "gpt2": Config(layers=12, dim=768, heads=12, kv_heads=12, hidden=3072, vocab=50257),
    "llama70b": Config(
        layers=80,
        dim=8192,
        heads=64,
        kv_heads=8,
        hidden=28672,
        vocab=128256,
        dtype=torch.bfloat16,
        checkpoint=True,
    ),
}


class Attention(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c.heads, c.kv_heads, c.dim // c.heads
        self.q = nn.Linear(c.dim, c.dim, bias=False)
        self.kv = nn.Linear(c.dim, 2 * c.kv_heads * self.head_dim, bias=False)
        self.out = nn.Linear(c.dim, c.dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2 * self.kv_heads, self.head_dim).transpose(1, 2).chunk(2, 1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.out(y.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(c.dim), nn.RMSNorm(c.dim)
        self.attn = Attention(c)
        self.up = nn.Linear(c.dim, 2 * c.hidden, bias=False)  # gate and up, SwiGLU
        self.down = nn.Linear(c.hidden, c.dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        gate, up = self.up(self.norm2(x)).chunk(2, -1)
        return x + self.down(F.silu(gate) * up)


class Transformer(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.checkpoint = c.checkpoint
        self.embed = nn.Embedding(c.vocab, c.dim)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = nn.RMSNorm(c.dim)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            if self.checkpoint:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.norm(x))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(CONFIGS), default="tiny")
    p.add_argument("--strategy", choices=("ddp", "fsdp"), default="fsdp")
    p.add_argument("--batch", type=int, default=2, help="sequences per rank")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--device", default="cuda")
    p.add_argument("--backend", default="nccl")
    p.add_argument("--rank0-extra-mib", type=int, default=0, help="rank 0 holds this much more")
    return p.parse_args(argv)


def build(args: argparse.Namespace, device: torch.device) -> nn.Module:
    """The model on ``device``: DDP-wrapped, or FSDP2-sharded per block and at the root."""
    from torch.distributed.device_mesh import init_device_mesh

    c = CONFIGS[args.model]
    torch.manual_seed(0)
    with torch.device("meta"):
        model = Transformer(c).to(c.dtype)
    if args.strategy == "ddp":
        model = model.to_empty(device=device)
        _init(model)
        return nn.parallel.DistributedDataParallel(model)
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device=device)  # each rank allocates its shards only
    _init(model)
    return model


@torch.no_grad()
def _init(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        elif isinstance(m, nn.RMSNorm):
            nn.init.ones_(m.weight)


def train(
    args: argparse.Namespace,
    model: nn.Module,
    device: torch.device,
    around: Callable[[nn.Module, torch.optim.Optimizer], AbstractContextManager] | None = None,
) -> Tensor:
    """``--steps`` AdamW steps on random tokens; the last loss. ``around(model, opt)``: a
    context the steps run in (``plan_fsdp_tracker.py``: ``FSDPMemTracker``)."""
    vocab = CONFIGS[args.model].vocab
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    gen = torch.Generator(device).manual_seed(1 + dist.get_rank())
    loss = torch.zeros((), device=device)
    with around(model, opt) if around else nullcontext():
        for _ in range(args.steps):
            idx = torch.randint(vocab, (args.batch, args.seq + 1), device=device, generator=gen)
            logits = model(idx[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), idx[:, 1:].flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    if dist.get_rank() == 0 and args.rank0_extra_mib:  # e.g. gathering metrics or a checkpoint
        extra = torch.empty(args.rank0_extra_mib * 2**20, dtype=torch.uint8, device=device)
        del extra
    return loss


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(args.device, local) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend)
    try:
        model = build(args, device)
        loss = train(args, model, device)
        if dist.get_rank() == 0:
            print(f"loss {loss.item():.4f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
