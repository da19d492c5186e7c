"""x.to(other) takes other's dtype and device; x.to(...) that changes nothing returns x unless
copy=True.
"""

import torch

# torch/_tensor_docs.py Tensor.to: "to(other, non_blocking=False, copy=False) -> Tensor: Returns
# a Tensor with same torch.dtype and torch.device as the Tensor other"; "If the self Tensor
# already has the correct torch.dtype and torch.device, then self is returned. Otherwise, the
# returned tensor is a copy"; "When copy is set, a new Tensor is created even when the Tensor
# already matches the desired conversion."
x = torch.ones(3)
y = torch.zeros(1, device="cuda", dtype=torch.float16)
z = x.to(y)
assert z.device == torch.device("cuda:0") and z.dtype == torch.float16
assert z.to(y) is z
assert z.to("cuda") is z and z.to("cuda:0") is z and z.to(torch.float16) is z
w = z.to("cuda", copy=True)
assert w is not z and w.data_ptr() != z.data_ptr()
v = z.to(torch.float16, copy=True)
assert v is not z and v.data_ptr() != z.data_ptr()
print("ok")
