"""A 0-dim CPU tensor mixes with a cuda tensor (result on cuda); a 1-element 1-D CPU tensor
doesn't.
"""

import torch

# aten/src/ATen/TensorIterator.cpp compute_types: "Handles CPU scalars on CUDA kernels that
# support them": an input with dim() == 0 on the CPU is allowed beside a CUDA common device;
# anything else on another device fails ("... found at least two devices, cuda:0 and cpu!").
g = torch.arange(3.0, device="cuda")
r = g * torch.tensor(2.0)
assert r.device == torch.device("cuda:0") and r.tolist() == [0.0, 2.0, 4.0]
r2 = torch.tensor(1.0) + g
assert r2.is_cuda and r2.tolist() == [1.0, 2.0, 3.0]
g.add_(torch.tensor(1))
assert g.tolist() == [1.0, 2.0, 3.0]
try:
    g * torch.tensor([2.0])
except RuntimeError as e:
    assert "cuda:0 and cpu" in str(e), str(e)
else:
    raise SystemExit("a 1-D CPU tensor was accepted")
# A 0-dim CUDA tensor beside a full CPU tensor is not a CPU scalar: refused as well.
try:
    torch.tensor(2.0, device="cuda") * torch.ones(3)
except RuntimeError as e:
    assert "cuda:0 and cpu" in str(e), str(e)
else:
    raise SystemExit("a 0-dim cuda tensor with a CPU tensor was accepted")
print("ok")
