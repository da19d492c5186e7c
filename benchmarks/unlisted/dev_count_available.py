"""One H100: is_available() True, device_count() 1, accelerator API says cuda."""

import torch

# torch/cuda/__init__.py is_available / device_count; torch/accelerator/__init__.py
# current_accelerator returns torch.device("cuda") when CUDA is the build's accelerator
# and is available, device_count() counts its devices.
assert torch.cuda.is_available()
assert torch.cuda.device_count() == 1
assert torch.accelerator.is_available()
assert torch.accelerator.current_accelerator() == torch.device("cuda")
assert torch.accelerator.device_count() == 1
print("ok")
