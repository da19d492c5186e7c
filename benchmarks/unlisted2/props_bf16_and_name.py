"""An H100: is_bf16_supported() True, capability (9, 0) from an int, a string or a torch.device;
its name.
"""

import torch

# torch/cuda/__init__.py is_bf16_supported: True when get_device_properties(current).major >= 8;
# get_device_capability(device) returns (major, minor) and takes an int, str or torch.device;
# H100 SXM5 is compute capability 9.0 and reports "NVIDIA H100 80GB HBM3"
# (/work/shared/reference/gpu-specs-and-info-tools.md, H100 row; NVIDIA CUDA GPUs list).
assert torch.cuda.is_bf16_supported() is True
assert torch.cuda.is_bf16_supported(including_emulation=False) is True
assert torch.cuda.get_device_capability() == (9, 0)
assert torch.cuda.get_device_capability(0) == (9, 0)
assert torch.cuda.get_device_capability("cuda:0") == (9, 0)
assert torch.cuda.get_device_capability(torch.device("cuda")) == (9, 0)
assert torch.cuda.get_device_name(torch.device("cuda:0")) == "NVIDIA H100 80GB HBM3"
p = torch.cuda.get_device_properties("cuda")
assert (p.major, p.minor) == (9, 0) and p.name == "NVIDIA H100 80GB HBM3"
print("ok")
