"""max_memory_allocated tracks the peak; reset_peak_memory_stats sets it to the current value."""

import torch

# torch/cuda/memory.py max_memory_allocated = memory_stats()["allocated_bytes.all.peak"];
# reset_peak_memory_stats resets every ".peak" to ".current" (CUDACachingAllocator.cpp).
a = torch.empty(2**20, device="cuda")  # 4 MiB
b = torch.empty(2**21, device="cuda")  # 8 MiB
del b
assert torch.cuda.max_memory_allocated() == 12 * 2**20
assert torch.cuda.memory_allocated() == 4 * 2**20
torch.cuda.reset_peak_memory_stats()
assert torch.cuda.max_memory_allocated() == 4 * 2**20
assert torch.cuda.max_memory_reserved() == torch.cuda.memory_reserved()
print("ok")
