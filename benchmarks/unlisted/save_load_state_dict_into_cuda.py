"""load_state_dict of a CPU state dict into a CUDA module copies values and keeps parameters on
cuda.
"""

import torch

# torch/nn/modules/module.py _load_from_state_dict: param.copy_(input_param) under no_grad,
# so the parameter keeps its device.
cpu = torch.nn.Linear(3, 2)
gpu = torch.nn.Linear(3, 2).cuda()
gpu.load_state_dict(cpu.state_dict())
assert gpu.weight.device.type == "cuda"
assert torch.equal(gpu.weight.cpu(), cpu.weight.detach())
sd = gpu.state_dict()
assert all(v.device.type == "cuda" for v in sd.values())
print("ok")
