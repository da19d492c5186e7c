"""set_per_process_memory_fraction(0.001): 40 MB fits, 200 MB raises OutOfMemoryError."""

import torch

# torch/cuda/memory.py set_per_process_memory_fraction: "If trying to allocate more than the
# allowed value in a process, will raise an out of memory error in allocator";
# CUDACachingAllocator.cpp setMemoryFraction -> allowed_memory_maximum = fraction * total.
torch.cuda.set_per_process_memory_fraction(0.001)  # about 81 MiB of an H100
a = torch.empty(40 * 10**6, dtype=torch.uint8, device="cuda")
try:
    torch.empty(200 * 10**6, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    pass
else:
    raise SystemExit("no error")
print("ok")
