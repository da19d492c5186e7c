"""On a GPU machine's CUDA build: backends.cuda.is_built() True, version.cuda a 'major.minor'
string, sm_90 in the arch list.
"""

import re

import torch

# torch/backends/cuda/__init__.py is_built -> torch._C._has_cuda; torch/version.py cuda is
# set at build time; torch/cuda/__init__.py get_arch_list -> _cuda_getArchFlags; PyTorch's
# CUDA 12/13 wheels are built for sm_90 (TORCH_CUDA_ARCH_LIST in .ci/manywheel/build_cuda.sh).
assert torch.backends.cuda.is_built()
assert isinstance(torch.version.cuda, str) and re.fullmatch(r"\d+\.\d+", torch.version.cuda)
assert "sm_90" in torch.cuda.get_arch_list(), torch.cuda.get_arch_list()
assert "sm_90" in torch.cuda.get_gencode_flags()
print("ok")
