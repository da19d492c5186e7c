"""Activation checkpointing (non-reentrant and reentrant) runs and lowers the peak.

GPU: torch.utils.checkpoint over blocks with dropout, scaled_dot_product_attention and
CUDA autocast recomputes in backward exactly what forward saw (same dropout mask from the
restored CUDA RNG state, same autocast dtype, same attention kernel), so no CheckpointError
is raised, gradients match the uncheckpointed ones, and the peak memory is lower.
Source: torch/utils/checkpoint.py (non-reentrant checks recomputed tensor metadata and
raises CheckpointError on a mismatch; it saves and restores device RNG state and autocast
state per device type).
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 4, d // 4).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1)
        x = x + self.drop(att.transpose(1, 2).reshape(b, t, d))
        return x + self.drop(self.mlp(x))


def step(blocks: nn.ModuleList, use_checkpoint: bool, reentrant: bool = False) -> int:
    torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    x = torch.randn(8, 256, 128, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        h = x
        for blk in blocks:
            h = checkpoint(blk, h, use_reentrant=reentrant) if use_checkpoint else blk(h)
    h.float().sum().backward()
    return torch.cuda.max_memory_allocated()


blocks = nn.ModuleList(Block(128) for _ in range(4)).cuda()
plain = step(blocks, False)
grads = [p.grad.clone() for p in blocks.parameters()]
blocks.zero_grad(set_to_none=True)
saved = step(blocks, True)
assert saved < plain, (saved, plain)
blocks.zero_grad(set_to_none=True)
reentrant = step(blocks, True, reentrant=True)
assert reentrant < plain, (reentrant, plain)

EXPECT = {"values": ["real", "placeholder"]}
