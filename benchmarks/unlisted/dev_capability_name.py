"""get_device_capability / get_device_name agree with the properties, for int, str and device."""

import torch

# torch/cuda/__init__.py: get_device_name = get_device_properties(device).name;
# get_device_capability = (prop.major, prop.minor); the device argument goes through
# torch.cuda._utils._get_device_index, which takes an int, "cuda:0" and torch.device.
p = torch.cuda.get_device_properties(0)
for d in (None, 0, "cuda", "cuda:0", torch.device("cuda", 0)):
    assert torch.cuda.get_device_name(d) == p.name, d
    assert torch.cuda.get_device_capability(d) == (9, 0), d
print("ok")
