"""Memory is counted per device: a tensor on cuda:1 shows in memory_allocated(1), not (0)."""
# gpus: 2

import torch

# torch/cuda/memory.py memory_allocated(device): one DeviceCachingAllocator per device
# (CUDACachingAllocator.cpp device_allocator[device]).
x = torch.empty(2**20, device="cuda:1")
assert torch.cuda.memory_allocated(1) == 4 * 2**20
assert torch.cuda.memory_allocated(0) == 0
assert torch.cuda.memory_allocated("cuda:1") == 4 * 2**20
y = x.to("cuda:0")
assert torch.cuda.memory_allocated(0) == 4 * 2**20
print("ok")
