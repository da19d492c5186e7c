"""A tensor made with device="cuda" is on "cuda:0" (an index), while torch.device("cuda") has
none.
"""

import torch

# docs/source/tensor_attributes.rst (torch.device): "If the device ordinal is not present, this
# object will always represent the current device for the device type ... e.g., a torch.Tensor
# constructed with device 'cuda' is equivalent to 'cuda:X' where X is the result of
# torch.cuda.current_device()." A tensor's device always carries the index.
d = torch.device("cuda")
assert d.index is None and d.type == "cuda"
x = torch.zeros(2, device="cuda")
assert x.device == torch.device("cuda", 0), x.device
assert x.device != d
assert str(x.device) == "cuda:0"
assert x.device.index == 0
assert torch.randn(2, device=d).device.index == 0
# torch/csrc/utils/python_arg_parser.h (device from an int): the index of the current
# accelerator (at::getAccelerator), which is CUDA on a machine with an NVIDIA GPU.
assert torch.empty(2, device=0).device == torch.device("cuda:0")
print("ok")
