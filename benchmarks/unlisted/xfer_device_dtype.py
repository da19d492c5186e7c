"""x.to(device, dtype) and x.to(other) take both the device and the dtype."""

import torch

# torch/_tensor_docs.py Tensor.to(device=None, dtype=None, non_blocking=False, copy=False,
# memory_format=...) and to(other): "Returns a Tensor with same torch.dtype and torch.device
# as the Tensor other."
x = torch.randn(4, 4)
h = x.to(torch.device("cuda"), torch.float16)
assert h.device.type == "cuda" and h.dtype == torch.float16
ref = torch.empty(1, dtype=torch.bfloat16, device="cuda")
b = x.to(ref)
assert b.device == ref.device and b.dtype == torch.bfloat16
assert torch.allclose(b.float().cpu(), x, atol=2e-2, rtol=1e-2)
print("ok")
