"""memory_allocated rounds each block up to 512 B: 1 byte -> 512, 4096 B -> 4096; freed on del."""

import torch

# c10/cuda/CUDACachingAllocator.cpp: kMinBlockSize = 512, round_size() rounds every request
# up to a multiple of 512; allocated_bytes counts the rounded block size.
base = torch.cuda.memory_allocated()
a = torch.empty(1, dtype=torch.uint8, device="cuda")
assert torch.cuda.memory_allocated() - base == 512
b = torch.empty(1024, dtype=torch.float32, device="cuda")
assert torch.cuda.memory_allocated() - base == 512 + 4096
c = torch.empty(129, dtype=torch.float32, device="cuda")  # 516 B -> 1024
assert torch.cuda.memory_allocated() - base == 512 + 4096 + 1024
del a, b, c
assert torch.cuda.memory_allocated() == base
print("ok")
