"""nn.DataParallel replicates the model and scatters the batch over every visible GPU.

GPU: with 2 GPUs, forward returns outputs gathered on cuda:0, gradients land on the
original parameters (cuda:0), and cuda:1 held a replica and half the batch during forward.
Source: torch/nn/parallel/data_parallel.py (replicate, scatter, parallel_apply, gather);
PyTorch "Optional: Data Parallelism" tutorial (beginner/blitz/data_parallel_tutorial).
"""

import torch
from torch import nn

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
dp = nn.DataParallel(model).cuda()
x = torch.randn(16, 32).cuda()
out = dp(x)
assert out.shape == (16, 2) and out.device == torch.device("cuda", 0)
out.sum().backward()
assert model[0].weight.grad is not None and model[0].weight.grad.device.index == 0
assert torch.cuda.max_memory_allocated(1) > 0  # the replica and its half of the batch

EXPECT = {"gpus": 2, "values": ["real", "placeholder"]}
