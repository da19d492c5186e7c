"""Model parallelism over two GPUs with placeholder values: per-device memory is exact.

GPU: cuda:0 holds net1 (16x32 + 32 floats) with its gradients and AdamW state; cuda:1 holds
net2 (32x4 + 4). Nothing fails.
Source: as multi_model_parallel.py.
"""

import torch
from torch import nn

net1 = nn.Linear(1024, 1024).to("cuda:0")
net2 = nn.Linear(1024, 8).to("cuda:1")
opt = torch.optim.AdamW([*net1.parameters(), *net2.parameters()])
for _ in range(2):
    opt.zero_grad()
    net2(net1(torch.randn(32, 1024, device="cuda:0")).to("cuda:1")).sum().backward()
    opt.step()
assert torch.cuda.memory_allocated(0) > 4 * 4 * 1024 * 1024  # weights, grads, 2 states
assert torch.cuda.memory_allocated(1) < torch.cuda.memory_allocated(0)  # each: a cuBLAS workspace

EXPECT = {"gpus": 2, "values": ["placeholder"]}
