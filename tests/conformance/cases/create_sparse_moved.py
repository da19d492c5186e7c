"""A sparse CPU tensor moved to a simulated GPU is refused plainly, as one made there is.

GPU: s.to("cuda") / s.cuda() of a sparse COO tensor makes a sparse CUDA tensor. The
simulator does not model sparse storage, so it must raise its own NotImplementedError
naming what is not simulated — found by skorch's test_sparse_tensor[cuda], which got
torch's "Cannot access storage of SparseTensorImpl" from inside the simulator instead.
Source: torch.sparse docs (CUDA supports COO/CSR); README, the simulator's limits.
"""

import torch

s = torch.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))
assert s.to_dense().sum().item() == 3.0  # sparse CPU tensors work as always
s.to("cuda")

EXPECT = {
    "sim_only": True,
    "exit": 1,
    "error": {
        "type": "NotImplementedError",
        "message": r"torchplace sim does not simulate sparse tensors on a GPU: torch\.sparse_coo.*",
        "line": 14,
    },
}
