"""`with torch.device("cuda"):` makes factories and new modules land on cuda:0 inside, cpu after."""

import torch

# torch/utils/_device.py DeviceContext (torch.device used as a context manager, docs
# "tensor_attributes.rst"): factory functions without device= inside the block use it.
with torch.device("cuda"):
    a = torch.ones(2)
    m = torch.nn.Linear(3, 4)
    e = torch.empty(1, 2)
assert a.device == torch.device("cuda:0"), a.device
assert m.weight.device == torch.device("cuda:0") and m.bias.device == torch.device("cuda:0")
assert e.is_cuda
b = torch.ones(2)
assert b.device.type == "cpu"
# An explicit device= still wins inside the block.
with torch.device("cuda"):
    c = torch.zeros(2, device="cpu")
assert c.device.type == "cpu"
print("ok")
