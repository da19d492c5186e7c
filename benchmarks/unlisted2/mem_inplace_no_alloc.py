"""In-place ops and views allocate nothing; an out-of-place op allocates one rounded block."""

import torch

# Tensor.add_/mul_/clamp_ write into self (no new storage); x + 1 allocates its result through
# the caching allocator, rounded to 512 bytes (c10/cuda/CUDACachingAllocator.cpp round_size).
x = torch.ones(1000, device="cuda")  # 4000 bytes -> 4096
base = torch.cuda.memory_allocated()
assert base == 4096
x.add_(1)
x.mul_(2)
x.clamp_(max=3)
x[:10].zero_()
assert torch.cuda.memory_allocated() == base
y = x + 1
assert torch.cuda.memory_allocated() == base + 4096
z = torch.cuda.memory_allocated()
torch.add(x, 1, out=y)
assert torch.cuda.memory_allocated() == z
print("ok")
