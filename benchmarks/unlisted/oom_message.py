"""A 100 GiB request raises torch.OutOfMemoryError (a RuntimeError) with CUDA's message; num_ooms
becomes 1.
"""

import torch

# c10/cuda/CUDACachingAllocator.cpp DeviceCachingAllocator::malloc: on failure
# TORCH_CHECK_WITH(OutOfMemoryError, ..., "CUDA out of memory. Tried to allocate ",
# format_size(alloc_size), ". GPU ", device, " has a total capacity of ", ... " of which ",
# ... " is free. ", "Including non-PyTorch memory, this process has ", ...); stats.num_ooms += 1.
# The "Including non-PyTorch memory, this process has X memory in use." part is
# reportProcessMemoryInfo (same file): NVML's running processes, this one named so; Linux
# wheels build with PYTORCH_C10_DRIVER_API_SUPPORTED, so a real GPU always prints it.
# torch.cuda.OutOfMemoryError is torch.OutOfMemoryError (torch/cuda/__init__.py).
assert torch.cuda.OutOfMemoryError is torch.OutOfMemoryError
assert issubclass(torch.OutOfMemoryError, RuntimeError)
keep = torch.empty(1000, device="cuda")
try:
    torch.empty(100 * 2**30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    msg = str(e)
    assert msg.startswith(
        "CUDA out of memory. Tried to allocate 100.00 GiB. GPU 0 has a total capacity of"
    ), msg
    assert "Including non-PyTorch memory, this process has" in msg, msg
else:
    raise SystemExit("no error")
assert torch.cuda.memory_stats()["num_ooms"] == 1
assert torch.cuda.memory_allocated() == 4096
print("ok")
