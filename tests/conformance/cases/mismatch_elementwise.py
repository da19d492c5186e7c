"""An elementwise op mixing a CUDA tensor with a CPU tensor raises; a 0-dim CPU tensor is fine.

GPU: `cuda + cpu` raises "Expected all tensors to be on the same device, but found at least
two devices, cuda:0 and cpu!"; `cuda * torch.tensor(2.0)` works (a CPU scalar).
Source: aten/src/ATen/TensorIterator.cpp TensorIteratorBase::compute_types (CPU scalars are
allowed in CUDA kernels that support them).
"""

import torch

x = torch.ones(3, device="cuda")
assert (x * torch.tensor(2.0)).is_cuda
assert torch.where(x > 0, x, torch.tensor(0.0)).is_cuda  # where takes CPU scalars too
y = x + torch.ones(3)

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        "line": 14,
    },
}
