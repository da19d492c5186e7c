"""The same indexing rules with placeholder values: CPU indices and masks are allowed.

GPU: as in index_cpu_indices.py; the shapes from CPU masks are exact (the mask's data is on
the host).
Source: aten/src/ATen/native/TensorAdvancedIndexing.cpp check_indices_on_cpu_or_selfdevice.
"""

import torch

x = torch.randn(3, 4, device="cuda")
assert x[torch.tensor([0, 2])].shape == (2, 4)
assert x[torch.tensor([True, False, True])].shape == (2, 4)
x.index_put_((torch.tensor([1]),), torch.tensor(-1.0))
x[torch.tensor([0])] = torch.zeros(1, 4, device="cuda")
assert x.is_cuda

EXPECT = {"values": ["placeholder"]}
