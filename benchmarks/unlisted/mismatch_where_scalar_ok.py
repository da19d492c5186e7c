"""torch.where(cuda_cond, cuda_x, 0.0) and x.clamp(min=cpu 0-dim) work: Python and 0-dim CPU
scalars are allowed.
"""

import torch

# aten TensorIterator: 0-dim CPU tensors are treated as scalars and may mix with CUDA tensors
# (TensorIteratorBase::compute_types, "is_cpu_scalar"); torch.where wraps a Python scalar.
x = torch.tensor([-1.0, 2.0, -3.0], device="cuda")
y = torch.where(x > 0, x, 0.0)
assert y.device.type == "cuda" and y.tolist() == [0.0, 2.0, 0.0]
z = x * torch.tensor(2.0)
assert z.device.type == "cuda" and z.tolist() == [-2.0, 4.0, -6.0]
print("ok")
