"""data_ptr() is distinct, stable and non-zero per storage; views are offset into it.

GPU: two tensors have different pointers; a view's pointer is its base's plus the offset in
bytes; untyped_storage().data_ptr() is the base's; libraries detect shared weights this way.
Source: aten/src/ATen/core/TensorBase.h data_ptr; the caching allocator hands out
addresses of blocks (c10/cuda/CUDACachingAllocator.cpp).
"""

import torch

a = torch.empty(100, device="cuda")
b = torch.empty(100, device="cuda")
assert a.data_ptr() != 0 and b.data_ptr() != 0 and a.data_ptr() != b.data_ptr()
assert a[10:].data_ptr() == a.data_ptr() + 10 * 4
assert a.untyped_storage().data_ptr() == a.data_ptr()
assert a.data_ptr() == a.data_ptr()
lin = torch.nn.Linear(4, 4).cuda()
tied = torch.nn.Linear(4, 4, bias=False).cuda()
tied.weight = lin.weight
assert tied.weight.untyped_storage().data_ptr() == lin.weight.untyped_storage().data_ptr()

EXPECT = {}
