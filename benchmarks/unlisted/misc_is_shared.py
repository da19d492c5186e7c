"""Tensor.is_shared() is True for CUDA tensors; share_memory_() returns the tensor unchanged."""

import torch

# torch/_tensor.py is_shared: "This is always True for CUDA tensors."; share_memory_: "This
# is a no-op if the underlying storage is already in shared memory and for CUDA tensors."
# Beneath: UntypedStorage.is_shared -> torch/csrc/StorageMethods.cpp THPStorage_isShared,
# "if (storage.device_type() == at::kCUDA) Py_RETURN_TRUE".
x = torch.ones(4, device="cuda")
assert x.is_shared()
assert x.share_memory_() is x
assert not torch.ones(4).is_shared()
print("ok")
