"""After del, the block stays reserved (cached); empty_cache() releases it to 0."""

import torch

# torch/cuda/memory.py empty_cache: "Release all unoccupied cached memory currently held by
# the caching allocator"; a freed block returns to the pool, not to the driver.
x = torch.empty(50 * 2**20, dtype=torch.uint8, device="cuda")
assert torch.cuda.memory_reserved() == 50 * 2**20
del x
assert torch.cuda.memory_allocated() == 0
assert torch.cuda.memory_reserved() == 50 * 2**20
torch.cuda.empty_cache()
assert torch.cuda.memory_reserved() == 0
print("ok")
