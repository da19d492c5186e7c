"""Catching an OOM and retrying with a smaller batch works; the failed request left nothing
allocated.
"""

import torch

# The failed cudaMalloc leaves the allocator's state as before (CUDACachingAllocator.cpp
# malloc raises before any block is split or recorded); a common pattern in training loops.
model = torch.nn.Linear(1024, 1024, device="cuda")
before = torch.cuda.memory_allocated()
batch = 2**26  # 2**26 x 1024 fp32 inputs = 256 GiB: cannot fit
while True:
    try:
        out = model(torch.empty(batch, 1024, device="cuda"))
        break
    except torch.OutOfMemoryError:
        assert torch.cuda.memory_allocated() == before
        batch //= 1024
assert batch == 2**16, batch
assert out.shape == (2**16, 1024)
print("ok")
