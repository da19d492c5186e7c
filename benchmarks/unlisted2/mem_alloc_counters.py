"""memory_stats counts allocations: current / allocated (cumulative) / freed, and no retries."""

import torch

# c10/cuda/CUDACachingAllocator.cpp (stats: "allocation" counts blocks handed out; current,
# peak, allocated = cumulative increments, freed = cumulative decrements); torch/cuda/memory.py
# memory_stats docstring ("num_alloc_retries": failed cudaMalloc calls that flushed the cache).
xs = [torch.empty(256, device="cuda") for _ in range(3)]
s = torch.cuda.memory_stats()
assert s["allocation.all.current"] == 3, s["allocation.all.current"]
assert s["allocation.all.allocated"] == 3
assert s["allocation.all.freed"] == 0
assert s["active.all.current"] == 3
del xs[0]
s = torch.cuda.memory_stats()
assert s["allocation.all.current"] == 2
assert s["allocation.all.allocated"] == 3 and s["allocation.all.freed"] == 1
assert s["allocation.all.peak"] == 3
assert s["num_alloc_retries"] == 0 and s["num_ooms"] == 0
assert torch.cuda.memory_allocated() == 2 * 1024  # 256 float32 = 1024 bytes, a multiple of 512
print("ok")
