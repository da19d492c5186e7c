"""torch.cuda.set_per_process_memory_fraction caps what the caching allocator may reserve.

GPU: with fraction 0.25, allocating 8 GiB more than a quarter of the card raises
torch.OutOfMemoryError whose message says how much is allowed ("... allowed;");
get_per_process_memory_fraction returns the fraction. The sizes follow the card (its first
version asked for 30 GiB, which fits under a quarter of an H200's 141 GB).
Source: torch/cuda/memory.py set_per_process_memory_fraction; c10/cuda/CUDACachingAllocator.cpp
(alloc_block fails past allowed_memory_maximum; the OOM message's allowed_info).
"""

import torch

GiB = 1024**3
total = torch.cuda.get_device_properties(0).total_memory
torch.cuda.set_per_process_memory_fraction(0.25)
assert torch.cuda.get_per_process_memory_fraction() == 0.25
small = torch.empty(GiB // 4, device="cuda")  # 1 GiB fits
ask = int(total * 0.25 / GiB) + 8  # whole GiB, more than allowed, less than the card
try:
    big = torch.empty(ask * GiB // 4, device="cuda")
except torch.OutOfMemoryError as e:
    assert f"CUDA out of memory. Tried to allocate {ask}.00 GiB." in str(e), str(e)
    assert " allowed; " in str(e), str(e)
else:
    raise AssertionError(f"{ask} GiB fitted under a 0.25 memory fraction")

EXPECT = {"values": ["placeholder"]}
