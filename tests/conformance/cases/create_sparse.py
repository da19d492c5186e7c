"""Sparse tensors on a simulated GPU are not simulated: the simulator says so plainly.

GPU: torch.sparse_coo_tensor(..., device="cuda") makes a sparse CUDA tensor. The simulator
does not model sparse storage; it must raise NotImplementedError naming what is not
simulated, never a crash inside torchplace or a silent CPU tensor.
Source: torch.sparse docs (CUDA supports COO/CSR); this case checks the simulator's
documented limitation (README, "What is not simulated").
"""

import torch

i = torch.tensor([[0, 1, 1], [2, 0, 2]])
v = torch.tensor([3.0, 4.0, 5.0])
s = torch.sparse_coo_tensor(i, v, (2, 3), device="cuda")
print(s.device)

EXPECT = {
    "sim_only": True,
    "exit": 1,
    "error": {
        "type": "NotImplementedError",
        "message": r"torchplace sim does not simulate sparse tensors on a GPU.*",
        "line": 14,
    },
}
