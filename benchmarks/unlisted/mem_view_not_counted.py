"""Views, slices and transposes share storage: memory_allocated does not grow."""

import torch

# A view shares its base's storage (torch/_tensor_docs: Tensor.view); the caching allocator
# accounts storages, not tensors (c10/cuda/CUDACachingAllocator.cpp).
x = torch.empty(1024, 1024, device="cuda")
m = torch.cuda.memory_allocated()
v = x.view(-1)
s = x[:10]
t = x.T
e = x.expand(1, 1024, 1024)
assert torch.cuda.memory_allocated() == m
c = t.contiguous()  # a real copy: 4 MiB more
assert torch.cuda.memory_allocated() == m + 4 * 2**20
del v, s, e, c
print("ok")
