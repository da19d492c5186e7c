"""A CUDA tensor's untyped_storage() is on cuda with nbytes = numel * itemsize."""

import torch

# torch/storage.py UntypedStorage.device / nbytes(); storage of a fresh tensor holds exactly
# its elements (at::empty_cuda -> storage nbytes = numel * element size).
x = torch.empty(10, 3, dtype=torch.float16, device="cuda")
s = x.untyped_storage()
assert s.device == torch.device("cuda:0")
assert s.nbytes() == 60
assert s.is_cuda
print("ok")
