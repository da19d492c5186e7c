"""A bare device ordinal names a device of the current accelerator: torch.device(0),
x.to(device=0) and model.to(device=0) mean cuda:0 on a CUDA machine.

GPU: torch.device(1) == torch.device("cuda", 1); tensors and modules moved with an int
``device=`` keyword land on that GPU. transformers' ``from_pretrained(device_map="auto")``
builds its device map from such ints ({"": 0}). On the CPU build torch.device(0) raises
"Cannot access accelerator device when none is available" (there is no accelerator), which
stopped that loading path under the simulator.
Source: torch/csrc/Device.cpp THPDevice_pynew (an int is a device index of
at::accelerator::getAccelerator); PyTorch docs, Tensor Attributes, torch.device ("For legacy
reasons, a device can be constructed via a single device ordinal, which is treated as the
current accelerator type").
"""

import torch

assert torch.device(1) == torch.device("cuda", 1)
assert isinstance(torch.device(0), torch.device) and str(torch.device(0)) == "cuda:0"
x = torch.ones(3).to(device=0, dtype=torch.float16)
assert x.device == torch.device("cuda", 0) and x.dtype == torch.float16
model = torch.nn.Linear(2, 2).to(device=1)
assert model.weight.device == torch.device("cuda", 1)
half = torch.nn.Linear(2, 2).to(device="cuda:1", dtype=torch.float16)
assert half.weight.device == torch.device("cuda", 1) and half.weight.dtype == torch.float16
assert torch.device("cpu").type == "cpu" and torch.device("cuda:1").index == 1

EXPECT = {"gpus": 2, "transfers": {"h2d": {"count": 5}}}
