"""CUDA tensor addresses are at least 256-byte aligned; a view's data_ptr is offset by elements."""

import torch

# CUDA C++ Programming Guide (Device Memory Accesses): "Any address of a variable residing in
# global memory or returned by one of the memory allocation routines from the driver or runtime
# API is always aligned to at least 256 bytes"; the caching allocator hands out blocks at
# multiples of 512 bytes within a segment (CUDACachingAllocator.cpp kMinBlockSize).
xs = [torch.empty(n, device="cuda") for n in (1, 3, 100, 1000)]
for x in xs:
    assert x.data_ptr() % 256 == 0, hex(x.data_ptr())
    assert x.data_ptr() != 0
v = xs[3][5:]
assert v.data_ptr() == xs[3].data_ptr() + 5 * 4
assert v.untyped_storage().data_ptr() == xs[3].data_ptr()
print("ok")
