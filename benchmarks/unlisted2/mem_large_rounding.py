"""Large requests: >= 10 MiB reserve a 2 MiB-rounded segment; 1-10 MiB a 20 MiB one; <= 1 MiB 2 MiB;
a large block is split only when more than 1 MiB would remain.
"""

import torch

# c10/cuda/CUDACachingAllocator.cpp (constants kMinBlockSize 512, kSmallSize 1 MiB, kSmallBuffer
# 2 MiB, kLargeBuffer 20 MiB, kMinLargeAlloc 10 MiB, kRoundLarge 2 MiB): round_size rounds to a
# multiple of 512; get_allocation_size gives kSmallBuffer for size <= kSmallSize, kLargeBuffer
# for size < kMinLargeAlloc, else the size rounded up to kRoundLarge; should_split (large pool):
# "(size < max_split_size) && (remaining > kSmallSize)" - otherwise the whole block is handed out
# and memory_allocated counts all of it. (Default settings: expandable_segments off, no
# roundup_power2_divisions, max_split_size unlimited.)
MiB = 1024**2
x = torch.empty(12 * MiB + 1, dtype=torch.uint8, device="cuda")  # 14 MiB segment, 2 MiB - 512 left
assert torch.cuda.memory_allocated() == 12 * MiB + 512, torch.cuda.memory_allocated()
assert torch.cuda.memory_reserved() == 14 * MiB, torch.cuda.memory_reserved()
del x
torch.cuda.empty_cache()
assert torch.cuda.memory_reserved() == 0
x = torch.empty(13 * MiB + 1, dtype=torch.uint8, device="cuda")  # 1 MiB - 512 left: not split
assert torch.cuda.memory_allocated() == 14 * MiB, torch.cuda.memory_allocated()
assert torch.cuda.memory_stats()["requested_bytes.all.current"] == 13 * MiB + 1
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
