"""set_device(2) on one GPU raises a RuntimeError naming 'invalid device ordinal'; set_device(-1)
is a no-op.
"""

import torch

# torch/cuda/__init__.py set_device: "This function is a no-op if this argument is negative";
# otherwise torch._C._cuda_setDevice -> c10::cuda::set_device -> cudaSetDevice, whose
# cudaErrorInvalidDevice is raised by C10_CUDA_CHECK as "CUDA error: invalid device ordinal"
# (a RuntimeError subclass, torch.AcceleratorError in recent builds).
torch.cuda.set_device(-1)
assert torch.cuda.current_device() == 0
try:
    torch.cuda.set_device(2)
except RuntimeError as e:
    assert "invalid device ordinal" in str(e), str(e)
else:
    raise SystemExit("no error")
assert torch.cuda.current_device() == 0
print("ok")
