"""randperm on cuda is a permutation on cuda; dropout(p=0.5) zeroes some and scales the rest
by 2.
"""

import torch
import torch.nn.functional as F

# aten/src/ATen/native/cuda/Randperm.cu; aten/src/ATen/native/cuda/Dropout.cu (fused dropout
# scales kept elements by 1/(1-p)).
p = torch.randperm(1000, device="cuda")
assert p.device.type == "cuda" and p.dtype == torch.int64
assert torch.equal(p.sort().values.cpu(), torch.arange(1000))
x = torch.ones(10_000, device="cuda")
y = F.dropout(x, 0.5, training=True)
vals = set(y.unique().tolist())
assert vals == {0.0, 2.0}, vals
frac = (y == 0).float().mean().item()
assert 0.45 < frac < 0.55, frac
print("ok")
