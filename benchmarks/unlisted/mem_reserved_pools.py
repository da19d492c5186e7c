"""Reserved memory: a small tensor reserves a 2 MiB segment, a 4 MiB one a 20 MiB segment, 11 MiB
rounds to 12 MiB.
"""

import torch

# c10/cuda/CUDACachingAllocator.cpp get_allocation_size(): size <= kSmallSize (1 MiB) ->
# kSmallBuffer (2 MiB); size < kMinLargeAlloc (10 MiB) -> kLargeBuffer (20 MiB); otherwise
# rounded up to kRoundLarge (2 MiB).
a = torch.empty(100, device="cuda")
assert torch.cuda.memory_reserved() == 2 * 2**20, torch.cuda.memory_reserved()
b = torch.empty(2**20, device="cuda")  # 4 MiB
assert torch.cuda.memory_reserved() == 22 * 2**20, torch.cuda.memory_reserved()
c = torch.empty(11 * 2**18, device="cuda")  # 11 MiB
assert torch.cuda.memory_reserved() == 34 * 2**20, torch.cuda.memory_reserved()
print("ok")
