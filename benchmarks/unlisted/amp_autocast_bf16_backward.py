"""bf16 autocast training step: output bfloat16, parameter grads float32."""

import torch

# Autocast casts in forward only; autograd records the casts (ToCopyBackward0), so the
# float32 leaf parameters receive float32 gradients (torch docs, "Automatic Mixed Precision").
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).cuda()
with torch.autocast("cuda", dtype=torch.bfloat16):
    out = m(torch.randn(4, 8, device="cuda"))
    assert out.dtype == torch.bfloat16
out.float().sum().backward()
assert all(p.grad.dtype == torch.float32 and p.grad.device.type == "cuda" for p in m.parameters())
print("ok")
