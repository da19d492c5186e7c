"""synchronize(1), current_stream(1), default_stream(1): each device has its own streams."""
# gpus: 2

import torch

# torch/cuda/__init__.py current_stream(device) / default_stream(device); streams compare
# unequal across devices (c10::Stream includes the device).
s0, s1 = torch.cuda.current_stream(0), torch.cuda.current_stream(1)
assert s0.device == torch.device("cuda:0") and s1.device == torch.device("cuda:1")
assert s0 != s1
torch.ones(4, device="cuda:1").sum()
torch.cuda.synchronize(1)
assert torch.cuda.default_stream(1) == s1
print("ok")
