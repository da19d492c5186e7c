"""*_like and new_* factories follow the source's device; device='cpu' overrides."""

import torch

# torch/_torch_docs.py zeros_like: "device ... Default: if None, defaults to the device of
# input"; Tensor.new_zeros: "By default, the returned Tensor has the same torch.dtype and
# torch.device as this tensor."
x = torch.randn(3, device="cuda", dtype=torch.float16)
for t in (
    torch.zeros_like(x),
    torch.empty_like(x),
    torch.rand_like(x),
    x.new_zeros(5),
    x.new_full((2,), 7.0),
):
    assert t.device == x.device and t.dtype == torch.float16, (t.device, t.dtype)
c = torch.zeros_like(x, device="cpu")
assert c.device.type == "cpu"
assert x.new_tensor([1, 2]).device == x.device
print("ok")
