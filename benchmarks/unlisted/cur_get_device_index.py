"""A tensor made with device='cuda' reports index 0; get_device() is 0, and -1 on the CPU."""

import torch

# torch.device("cuda").index is None (c10/core/Device.h), but a tensor always sits on a
# concrete device: empty_cuda resolves the current device. Tensor.get_device():
# "For CPU tensors, this function returns -1" (torch/_tensor_docs.py).
assert torch.device("cuda").index is None
t = torch.randn(3, device="cuda")
assert t.device.index == 0 and str(t.device) == "cuda:0"
assert t.get_device() == 0
assert torch.randn(2).get_device() == -1
assert t.is_cuda and t.device.type == "cuda"
print("ok")
