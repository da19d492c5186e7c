"""DDP's gradient buckets take as much memory as the gradients, from construction on.

GPU: DistributedDataParallel(model) allocates its buckets (one flat buffer per bucket,
together the size of all gradients) when it is built, on the model's device; the model's
gradients are separate tensors (gradient_as_bucket_view=False, the default). With
placeholder values the simulator models the reducer's backward (the note says so) but the
buckets are DDP's own allocations.
Source: torch/csrc/distributed/c10d/reducer.cpp (Reducer::initialize_buckets:
bucket.gradients = at::empty(...)); torch/nn/parallel/distributed.py (bucket_cap_mb).
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29562")
dist.init_process_group("nccl", rank=0, world_size=1)
model = torch.nn.Linear(2048, 2048).cuda()
params = torch.cuda.memory_allocated()
ddp = DDP(model, device_ids=[0])
buckets = torch.cuda.memory_allocated() - params
assert abs(buckets - params) <= 2 * 512, (buckets, params)  # the size of every gradient
ddp(torch.randn(16, 2048, device="cuda")).sum().backward()
assert model.weight.grad is not None and model.weight.grad.is_cuda
dist.destroy_process_group()

EXPECT = {
    "values": ["placeholder"],
    "notes": ["DistributedDataParallel with placeholder values"],
}
