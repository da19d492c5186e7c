"""Build facts a script checks: torch.version.cuda, cuDNN, the architecture list.

GPU (a CUDA wheel of torch): torch.version.cuda is a version string, cuDNN is available
with an integer version, torch.cuda.get_arch_list() lists sm_ architectures including the
GPU's, torch.cuda.is_initialized() is True after CUDA work.
Source: torch/version.py of torch-2.14.1+cu130 (cuda = '13.0'); torch/backends/cudnn;
torch/cuda/__init__.py get_arch_list (torch._C._cuda_getArchFlags).
"""

import torch

assert torch.version.cuda is not None and torch.version.cuda.count(".") == 1
assert torch.backends.cudnn.is_available() and isinstance(torch.backends.cudnn.version(), int)
assert "sm_90" in torch.cuda.get_arch_list()
torch.ones(1, device="cuda")
assert torch.cuda.is_initialized()
assert torch.cuda.is_available() and torch.backends.cuda.is_built() in (True, False)

EXPECT = {}
