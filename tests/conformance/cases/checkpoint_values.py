"""Checkpointed gradients equal plain gradients: the recompute replays the same dropout.

GPU: with preserve_rng_state (the default) the recomputed forward draws the same CUDA random
numbers, so gradients are identical to the uncheckpointed run.
Source: torch/utils/checkpoint.py (get_device_states / set_device_states around the
recompute).
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

net = nn.Sequential(nn.Linear(32, 64), nn.Dropout(0.5), nn.ReLU(), nn.Linear(64, 4)).cuda()
x = torch.randn(16, 32).cuda()


def grads(use_checkpoint: bool) -> list[torch.Tensor]:
    net.zero_grad(set_to_none=True)
    torch.manual_seed(1)
    out = checkpoint(net, x, use_reentrant=False) if use_checkpoint else net(x)
    out.sum().backward()
    return [p.grad.clone() for p in net.parameters()]


for a, b in zip(grads(False), grads(True), strict=True):
    assert torch.equal(a, b)

EXPECT = {"values": ["real"]}
