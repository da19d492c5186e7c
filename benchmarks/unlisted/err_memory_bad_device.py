"""memory_allocated(5) on one GPU: RuntimeError 'Invalid device argument 5: did you call init?'."""

import torch

# c10/cuda/CUDACachingAllocator.cpp NativeCachingAllocator::assertValidDevice:
# TORCH_CHECK(0 <= device && device < device_num, "Invalid device argument ", device, ": did you
#   call init?")
# reached from torch.cuda.memory_stats -> torch._C._cuda_memoryStats(device).
torch.zeros(1, device="cuda")
try:
    torch.cuda.memory_allocated(5)
except RuntimeError as e:
    assert "Invalid device argument 5: did you call init?" in str(e), str(e)
else:
    raise SystemExit("no error")
print("ok")
