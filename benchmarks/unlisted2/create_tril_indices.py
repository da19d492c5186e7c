"""torch.tril_indices / triu_indices on cuda give int64 cuda tensors of the documented values."""

import torch

# _torch_docs.py tril_indices / triu_indices: the examples give these values; dtype defaults
# to torch.long; both have CUDA kernels (native_functions.yaml: tril_indices: CUDA:
# tril_indices_cuda).
t = torch.tril_indices(3, 3, device="cuda")
assert t.device == torch.device("cuda:0") and t.dtype == torch.int64
assert t.tolist() == [[0, 1, 1, 2, 2, 2], [0, 0, 1, 0, 1, 2]], t.tolist()
u = torch.triu_indices(3, 3, 1, device="cuda")
assert u.tolist() == [[0, 0, 1], [1, 2, 2]], u.tolist()
assert torch.tril_indices(4, 3, -1, device="cuda").tolist() == [
    [1, 2, 2, 3, 3, 3],
    [0, 0, 1, 0, 1, 2],
]
print("ok")
