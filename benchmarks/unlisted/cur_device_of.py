"""torch.cuda.device_of(t) makes t's device current inside the block."""
# gpus: 2

import torch

# torch/cuda/__init__.py class device_of(device): idx = obj.get_device() if obj.is_cuda else -1
t = torch.zeros(2, device="cuda:1")
with torch.cuda.device_of(t):
    assert torch.cuda.current_device() == 1
assert torch.cuda.current_device() == 0
with torch.cuda.device_of(torch.zeros(1)):  # a CPU tensor: idx -1, nothing changes
    assert torch.cuda.current_device() == 0
print("ok")
