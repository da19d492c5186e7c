"""A freed block is reused: a second tensor of the same size reserves nothing new and gets the same
address.
"""

import torch

# c10/cuda/CUDACachingAllocator.cpp malloc: get_free_block() best-fits from the pool before
# alloc_block() asks cudaMalloc for a new segment.
x = torch.empty(8 * 2**20, dtype=torch.uint8, device="cuda")
addr = x.data_ptr()
r = torch.cuda.memory_reserved()
del x
y = torch.empty(8 * 2**20, dtype=torch.uint8, device="cuda")
assert torch.cuda.memory_reserved() == r
assert y.data_ptr() == addr
print("ok")
