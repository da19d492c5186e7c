"""A zero-element CUDA tensor allocates nothing: memory_allocated stays 0 and data_ptr() is 0."""

import torch

# c10/cuda/CUDACachingAllocator.cpp NativeCachingAllocator::allocate: "if (size == 0) return
# {nullptr, ...}" - no block, no segment.
x = torch.empty(0, device="cuda")
y = torch.zeros(0, 5, device="cuda")
assert x.data_ptr() == 0 and y.data_ptr() == 0
assert torch.cuda.memory_allocated() == 0
assert torch.cuda.memory_reserved() == 0
print("ok")
