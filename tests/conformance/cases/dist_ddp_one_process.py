"""DDP in one process with the NCCL backend: the PyTorch DDP tutorials' setup, world size 1.

GPU: init_process_group("nccl", rank=0, world_size=1) and DistributedDataParallel(model,
device_ids=[0]) train normally; gradients stay on cuda:0 (the all-reduce of one rank is the
identity); model.to(rank) with an int puts the model on cuda:rank.
Source: PyTorch tutorial "Getting Started with Distributed Data Parallel"
(intermediate/ddp_tutorial: setup(), model.to(rank), DDP(model, device_ids=[rank]));
torch/nn/parallel/distributed.py.
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29561")
dist.init_process_group("nccl", rank=0, world_size=1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(10, 10), torch.nn.ReLU(), torch.nn.Linear(10, 5)).to(0)
ddp = DDP(model, device_ids=[0])
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
x, y = torch.randn(20, 10), torch.randn(20, 5)
losses = []
for _ in range(3):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(ddp(x), y.to(0))
    loss.backward()
    opt.step()
    losses.append(loss.item())
assert model[0].weight.grad.device == torch.device("cuda", 0)
assert losses[-1] < losses[0], losses
dist.destroy_process_group()

EXPECT = {"values": ["real"], "notes": ["not simulated: NCCL"]}
