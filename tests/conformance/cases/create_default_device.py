"""torch.set_default_device("cuda") and `with torch.device("cuda"):` place factories on cuda.

GPU: torch.zeros/ones/empty/randn/arange and nn.Linear's parameters, made without a
device, land on cuda:0; torch.get_default_device() is cuda:0; after set_default_device(None)
factories make CPU tensors again.
Source: torch/__init__.py set_default_device; torch/utils/_device.py DeviceContext (it adds
device= to every function in _device_constructors()).
"""

import torch

with torch.device("cuda"):
    lin = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
assert lin.weight.is_cuda and x.is_cuda
torch.set_default_device("cuda")
try:
    assert torch.get_default_device() == torch.device("cuda", 0)
    for t in (torch.zeros(2), torch.ones(2), torch.empty(2), torch.arange(3), torch.tensor([1.0])):
        assert t.device == torch.device("cuda", 0), t.device
    assert torch.nn.Linear(2, 2).weight.is_cuda
finally:
    torch.set_default_device(None)
assert torch.zeros(2).device.type == "cpu"

EXPECT = {}
