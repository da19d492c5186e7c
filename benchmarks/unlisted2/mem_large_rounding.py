"""Large requests: >= 10 MiB reserve a 2 MiB-rounded segment; 1-10 MiB a 20 MiB one; <= 1 MiB 2
MiB.
"""

import torch

# c10/cuda/CUDACachingAllocator.cpp (constants kMinBlockSize 512, kSmallSize 1 MiB, kSmallBuffer
# 2 MiB, kLargeBuffer 20 MiB, kMinLargeAlloc 10 MiB, kRoundLarge 2 MiB): round_size rounds to a
# multiple of 512; get_allocation_size gives kSmallBuffer for size <= kSmallSize, kLargeBuffer
# for size < kMinLargeAlloc, else the size rounded up to kRoundLarge. (Default settings:
# expandable_segments off, no roundup_power2_divisions.)
MiB = 1024**2
x = torch.empty(13 * MiB + 1, dtype=torch.uint8, device="cuda")
assert torch.cuda.memory_allocated() == 13 * MiB + 512, torch.cuda.memory_allocated()
assert torch.cuda.memory_reserved() == 14 * MiB, torch.cuda.memory_reserved()
del x
torch.cuda.empty_cache()
assert torch.cuda.memory_reserved() == 0
y = torch.empty(MiB + 1, dtype=torch.uint8, device="cuda")
assert torch.cuda.memory_allocated() == MiB + 512
assert torch.cuda.memory_reserved() == 20 * MiB, torch.cuda.memory_reserved()
z = torch.empty(MiB, dtype=torch.uint8, device="cuda")  # exactly kSmallSize: the small pool
assert torch.cuda.memory_allocated() == 2 * MiB + 512
assert torch.cuda.memory_reserved() == 22 * MiB, torch.cuda.memory_reserved()
print("ok")
