"""An event that was never recorded: query() is True and synchronize() returns at once."""

import torch

# c10/cuda/CUDAEvent.h (at::cuda::CUDAEvent) query(): "if (!is_created_) return true;"
# synchronize(): "if (is_created_) ..." - nothing to wait for.
e = torch.cuda.Event()
assert e.query() is True
e.synchronize()
print("ok")
