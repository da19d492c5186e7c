"""Deterministic mode: put_(accumulate=True) on CUDA raises; index_add on CUDA is allowed
(deterministic path).
"""

import torch

# torch/__init__.py use_deterministic_algorithms docstring: "torch.Tensor.put_ when
# accumulate=True and called on a CUDA tensor" throws; "torch.index_add when called on CUDA
# tensor" acts deterministically.
torch.use_deterministic_algorithms(True)
x = torch.zeros(5, device="cuda")
idx = torch.tensor([0, 0, 1], device="cuda")
try:
    x.put_(idx, torch.ones(3, device="cuda"), accumulate=True)
except RuntimeError as e:
    assert "does not have a deterministic implementation" in str(e), str(e)
else:
    raise SystemExit("no error")
y = torch.zeros(5, device="cuda").index_add(0, idx, torch.ones(3, device="cuda"))
assert y.tolist() == [2.0, 1.0, 0.0, 0.0, 0.0]
print("ok")
