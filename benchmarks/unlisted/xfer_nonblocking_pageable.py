"""non_blocking=True from pageable memory is allowed and correct; the device->host result is
right after synchronize.
"""

import torch

# Tensor.to docs: non_blocking "tries to convert asynchronously ... if possible"; from
# pageable memory CUDA's copy is synchronous w.r.t. the host (Copy.cu copy_kernel_cuda).
a = torch.randn(1000)
g = a.to("cuda", non_blocking=True)
b = g.to("cpu", non_blocking=True)
torch.cuda.synchronize()
assert torch.equal(a, b)
print("ok")
