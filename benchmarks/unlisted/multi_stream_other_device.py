"""A Stream made for device 1 reports cuda:1; work queued on it under torch.cuda.device(1) runs
there.
"""
# gpus: 2

import torch

# torch/cuda/streams.py Stream(device=1): "with torch.cuda.device(device): super().__new__(...)".
s = torch.cuda.Stream(device=1)
assert s.device == torch.device("cuda:1")
with torch.cuda.device(1), torch.cuda.stream(s):
    y = torch.ones(8, device="cuda") * 3
assert y.device == torch.device("cuda:1")
s.synchronize()
assert y.sum().item() == 24.0
print("ok")
