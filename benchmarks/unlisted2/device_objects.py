"""torch.device("cuda", 0) equals "cuda:0" but not "cuda"; reprs; an unknown type raises
RuntimeError.
"""

import torch

# c10/core/Device.cpp (parse_type, Device::str) and torch/csrc/Device.cpp (THPDevice_repr,
# richcompare compares type and index): "device(type='cuda', index=0)" / "device(type='cuda')";
# an unknown type fails with "Expected one of ... device type at start of device string: gpu".
assert torch.device("cuda", 0) == torch.device("cuda:0")
assert torch.device("cuda") != torch.device("cuda:0")
assert repr(torch.device("cuda:0")) == "device(type='cuda', index=0)"
assert repr(torch.device("cuda")) == "device(type='cuda')"
assert str(torch.device("cuda", 1)) == "cuda:1"
assert {torch.device("cuda:0"): 1}[torch.device("cuda", 0)] == 1
try:
    torch.device("gpu")
except RuntimeError as e:
    assert str(e).startswith("Expected one of"), str(e)
    assert str(e).endswith("device type at start of device string: gpu"), str(e)
else:
    raise SystemExit("no error")
# torch.device(int): the current accelerator's device of that index (torch/csrc/Device.cpp,
# at::getAccelerator), cuda on a machine with an NVIDIA GPU.
assert torch.device(0) == torch.device("cuda:0")
x = torch.ones(1, device=torch.device("cuda", 0))
assert x.device == torch.device("cuda:0")
print("ok")
