"""max_memory_reserved keeps the peak after empty_cache; reset_peak_memory_stats sets it to
current.
"""

import torch

# c10/cuda/CUDACachingAllocator.cpp resetPeakStats: every stat's peak = current;
# torch/cuda/memory.py max_memory_reserved ("peak cached memory since the beginning of this
# program"), reset_peak_memory_stats ("Reset the peak values tracked by the CUDA memory
# allocator"). 30 MiB >= 10 MiB reserves exactly 30 MiB (a multiple of 2 MiB).
MiB = 1024**2
x = torch.empty(30 * MiB, dtype=torch.uint8, device="cuda")
assert torch.cuda.memory_reserved() == 30 * MiB
del x
torch.cuda.empty_cache()
assert torch.cuda.memory_reserved() == 0
assert torch.cuda.max_memory_reserved() == 30 * MiB
assert torch.cuda.max_memory_allocated() == 30 * MiB
torch.cuda.reset_peak_memory_stats()
assert torch.cuda.max_memory_reserved() == 0, torch.cuda.max_memory_reserved()
assert torch.cuda.max_memory_allocated() == 0
y = torch.empty(1024, device="cuda")
assert torch.cuda.max_memory_allocated() == 4096
assert torch.cuda.max_memory_reserved() == 2 * MiB
print("ok")
