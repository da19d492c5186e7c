"""torch.cuda.set_per_process_memory_fraction caps what the caching allocator may reserve.

GPU: with fraction 0.25 of an 80 GiB H100, allocating 30 GiB raises torch.OutOfMemoryError
whose message says how much is allowed ("... allowed;"); get_per_process_memory_fraction
returns the fraction.
Source: torch/cuda/memory.py set_per_process_memory_fraction; c10/cuda/CUDACachingAllocator.cpp
(alloc_block fails past allowed_memory_maximum; the OOM message's allowed_info).
"""

import torch

torch.cuda.set_per_process_memory_fraction(0.25)
assert torch.cuda.get_per_process_memory_fraction() == 0.25
small = torch.empty(1024**3 // 4, device="cuda")  # 1 GiB fits
try:
    big = torch.empty(30 * 1024**3 // 4, device="cuda")
except torch.OutOfMemoryError as e:
    assert "CUDA out of memory. Tried to allocate 30.00 GiB." in str(e), str(e)
    assert " allowed; " in str(e), str(e)
else:
    raise AssertionError("30 GiB fitted under a 0.25 memory fraction")

EXPECT = {"values": ["placeholder"]}
