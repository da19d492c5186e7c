"""CPU -> CUDA -> CPU keeps values bit for bit; .cpu() gives a new tensor on the CPU."""

import torch

# A host<->device copy is a memcpy (aten/src/ATen/native/cuda/Copy.cu copy_kernel_cuda):
# values do not change.
a = torch.randn(1000, dtype=torch.float64)
g = a.cuda()
assert g.device.type == "cuda" and g.dtype == torch.float64
b = g.cpu()
assert b.device == torch.device("cpu")
assert torch.equal(a, b)
assert b.data_ptr() != a.data_ptr()
assert g.tolist() == a.tolist()
print("ok")
