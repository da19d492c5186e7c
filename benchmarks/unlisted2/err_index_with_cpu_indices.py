"""Indexing a cuda tensor with CPU index or mask tensors works; the result is on cuda."""

import torch

# aten/src/ATen/native/TensorAdvancedIndexingUtils.h / IndexingUtils (make_info): index tensors
# on another device than self are moved to self's device ("if the non-null indices are not all
# on the same device as the src, move them"); a boolean mask is turned into indices first.
g = torch.arange(10.0, device="cuda")
r = g[torch.tensor([0, 3, 9])]
assert r.device == torch.device("cuda:0") and r.tolist() == [0.0, 3.0, 9.0]
m = torch.arange(10) % 2 == 0
r2 = g[m]
assert r2.is_cuda and r2.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
g[torch.tensor([1, 2])] = 0.0
assert g[:3].tolist() == [0.0, 0.0, 0.0]
print("ok")
