"""Under torch.autocast('cuda'), nn.Linear outputs float16; exp stays float32; outside it is
float32 again.
"""

import torch

# torch/amp/autocast_mode.py (default CUDA dtype float16, torch.get_autocast_dtype("cuda"));
# aten/src/ATen/autocast_mode.cpp: linear is in the lower_precision_fp list; exp is not listed
# (runs in the input's dtype).
m = torch.nn.Linear(16, 16).cuda()
x = torch.randn(4, 16, device="cuda")
assert torch.get_autocast_dtype("cuda") == torch.float16
with torch.autocast("cuda"):
    assert torch.is_autocast_enabled("cuda")
    y = m(x)
    assert y.dtype == torch.float16
    assert torch.exp(x).dtype == torch.float32
assert m(x).dtype == torch.float32
assert not torch.is_autocast_enabled("cuda")
print("ok")
