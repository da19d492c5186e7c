"""Tensor.is_shared() is True for CUDA tensors; share_memory_() returns the tensor unchanged."""

import torch

# torch/_tensor.py is_shared: "This is always True for CUDA tensors."; share_memory_: "This
# is a no-op if the underlying storage is already in shared memory and for CUDA tensors."
x = torch.ones(4, device="cuda")
assert x.is_shared()
assert x.share_memory_() is x
assert not torch.ones(4).is_shared()
print("ok")
