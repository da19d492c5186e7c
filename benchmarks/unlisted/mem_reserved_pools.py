"""Reserved memory: a small tensor reserves a 2 MiB segment, a 12 MiB one exactly 12 MiB, a
4 MiB one a 20 MiB segment; a later 11 MiB tensor fits the 20 MiB segment's free 16 MiB.
"""

import torch

# c10/cuda/CUDACachingAllocator.cpp get_allocation_size(): size <= kSmallSize (1 MiB) ->
# kSmallBuffer (2 MiB); size < kMinLargeAlloc (10 MiB) -> kLargeBuffer (20 MiB); otherwise
# rounded up to kRoundLarge (2 MiB). get_free_block() best-fits a request into a cached block
# of the same pool before a new segment is made (max_split_size is unlimited by default).
a = torch.empty(100, device="cuda")
assert torch.cuda.memory_reserved() == 2 * 2**20, torch.cuda.memory_reserved()
b = torch.empty(3 * 2**20, device="cuda")  # 12 MiB
assert torch.cuda.memory_reserved() == 14 * 2**20, torch.cuda.memory_reserved()
c = torch.empty(2**20, device="cuda")  # 4 MiB
assert torch.cuda.memory_reserved() == 34 * 2**20, torch.cuda.memory_reserved()
d = torch.empty(11 * 2**18, device="cuda")  # 11 MiB: into the 20 MiB segment's free part
assert torch.cuda.memory_reserved() == 34 * 2**20, torch.cuda.memory_reserved()
assert torch.cuda.memory_allocated() == 512 + (12 + 4 + 11) * 2**20
print("ok")
