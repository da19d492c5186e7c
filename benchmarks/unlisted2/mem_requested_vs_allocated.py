"""memory_stats: requested_bytes is what was asked (100), allocated_bytes the 512-byte block."""

import torch

# c10/cuda/CUDACachingAllocator.cpp: round_size rounds a request below kMinBlockSize (512) up to
# 512 (allocated_bytes); requested_bytes (since torch 2.1) counts the caller's size; a small
# request (<= kSmallSize, 1 MiB) opens a kSmallBuffer (2 MiB) segment; one allocation, one
# segment. Stat names: torch/cuda/memory.py memory_stats docstring.
x = torch.empty(100, dtype=torch.uint8, device="cuda")
s = torch.cuda.memory_stats()
assert s["requested_bytes.all.current"] == 100, s["requested_bytes.all.current"]
assert s["allocated_bytes.all.current"] == 512, s["allocated_bytes.all.current"]
assert s["reserved_bytes.all.current"] == 2 * 1024**2
assert s["allocation.all.current"] == 1 and s["segment.all.current"] == 1
assert s["allocated_bytes.small_pool.current"] == 512
assert s["allocated_bytes.large_pool.current"] == 0
del x
s = torch.cuda.memory_stats()
assert s["requested_bytes.all.current"] == 0 and s["allocated_bytes.all.current"] == 0
assert s["requested_bytes.all.peak"] == 100
print("ok")
