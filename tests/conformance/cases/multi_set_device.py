"""torch.cuda.set_device(1) makes "cuda" mean cuda:1, per thread.

GPU: after set_device(1), torch.empty(1, device="cuda") is on cuda:1 and current_device() is
1; torch.cuda.device(0) switches back inside its block; another thread starts on device 0.
Source: torch/cuda/__init__.py set_device / device; CUDA's current device is per host
thread (CUDA Runtime API, cudaSetDevice).
"""

import threading

import torch

torch.cuda.set_device(1)
assert torch.cuda.current_device() == 1
assert torch.empty(1, device="cuda").device == torch.device("cuda", 1)
with torch.cuda.device(0):
    assert torch.empty(1, device="cuda").device.index == 0
assert torch.cuda.current_device() == 1
seen = []
t = threading.Thread(target=lambda: seen.append(torch.cuda.current_device()))
t.start()
t.join()
assert seen == [0], seen
model = torch.nn.Linear(2, 2).to(1)  # Module.to(int): the DDP tutorials' model.to(rank)
assert next(model.parameters()).device == torch.device("cuda", 1)
assert torch.ones(2).to(1).device.index == 1

EXPECT = {"gpus": 2}
