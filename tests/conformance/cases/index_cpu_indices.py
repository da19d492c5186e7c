"""A CUDA tensor indexed by CPU index tensors or a CPU bool mask works, as does index_put_.

GPU: x_cuda[cpu_long_index], x_cuda[cpu_bool_mask] and x_cuda.index_put_((cpu_idx,), v)
run; the indices are copied to the GPU by the kernel. The result is on cuda:0.
Source: aten/src/ATen/native/TensorAdvancedIndexing.cpp — check_indices_on_cpu_or_selfdevice
("Only allow: `dev_tensor[{cpu,dev}_tensor]`", pytorch#69607); make_info moves indices
to self's device; _index_put_impl_ moves a 0-dim value, and a bool mask with a one-element
CPU value goes to masked_fill_ (canDispatchToMaskedFill), which needs no sync.
"""

import torch

x = torch.arange(12.0, device="cuda").reshape(3, 4)
rows = x[torch.tensor([0, 2])]
assert rows.is_cuda and rows.tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
picked = x[torch.tensor([True, False, True])]
assert picked.is_cuda and picked.shape == (2, 4)
x.index_put_((torch.tensor([1]),), torch.tensor(-1.0))
assert x[1].tolist() == [-1.0] * 4
x[torch.tensor([0])] = torch.zeros(1, 4, device="cuda")
assert x[0].tolist() == [0.0] * 4
x[x < 0] = 7.0  # a CUDA mask and a scalar: masked_fill_, no sync
big = x[x > 6]  # a CUDA mask: nonzero on the GPU, a sync
x[x > 6] = big * 0  # index_put_ with a CUDA mask and a tensor value: a sync
assert x[1].tolist() == [0.0] * 4

EXPECT = {
    "values": ["real"],
    "syncs": [
        {"kind": "nonzero (boolean mask)", "line": 23, "count": 1},
        {"kind": "nonzero (boolean mask)", "line": 24, "count": 1},
    ],
}
