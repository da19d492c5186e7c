"""On a GPU machine: torch.backends.cuda.is_built() and cudnn.is_available() are True,
cudnn.version() an int.
"""

import torch

# torch/backends/cuda/__init__.py is_built: "Return whether PyTorch is built with CUDA support"
# (any torch that drives an NVIDIA GPU is); torch/backends/cudnn/__init__.py is_available /
# version ("Return the version of cuDNN", an int such as 90100, None when unavailable);
# torch.backends.cudnn.enabled defaults to True.
assert torch.backends.cuda.is_built() is True
assert torch.backends.cudnn.is_available() is True
v = torch.backends.cudnn.version()
assert isinstance(v, int) and v > 0, v
assert torch.backends.cudnn.enabled is True
assert torch.cuda.is_available()
print("ok")
