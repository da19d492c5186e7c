"""set_device('cuda:1') moves the current device; .cuda() with no argument then goes to cuda:1."""
# gpus: 2

import torch

# torch/cuda/__init__.py set_device -> torch._C._cuda_setDevice; Tensor.cuda(device=None)
# "If None, the default CUDA device is used" = the current device (torch/_tensor_docs.py).
torch.cuda.set_device("cuda:1")
assert torch.cuda.current_device() == 1
assert torch.ones(3).cuda().device == torch.device("cuda:1")
assert torch.cuda.current_stream().device == torch.device("cuda:1")
print("ok")
