"""torch.cuda.synchronize() with no argument, with 0, 'cuda:0' and a torch.device returns None."""

import torch

# torch/cuda/__init__.py synchronize(device=None): "Wait for all kernels in all streams on a
# CUDA device to complete"; with torch.cuda.device(device): torch._C._cuda_synchronize().
torch.ones(10, device="cuda").sum()
for d in (None, 0, "cuda:0", torch.device("cuda")):
    assert torch.cuda.synchronize(d) is None
assert torch.cuda.current_stream().query()
print("ok")
