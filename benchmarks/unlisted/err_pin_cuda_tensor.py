"""pin_memory() on a CUDA tensor raises RuntimeError "cannot pin 'torch.cuda.FloatTensor' only
dense CPU tensors can be pinned".
"""

import torch

# aten/src/ATen/native/Memory.cpp pin_memory / _pin_memory:
# TORCH_CHECK(self.device().is_cpu(), "cannot pin '", self.toString(), "' only dense CPU tensors
#   can be pinned");
x = torch.ones(3, device="cuda")
try:
    x.pin_memory()
except RuntimeError as e:
    assert "cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned" in str(e), (
        str(e)
    )
else:
    raise SystemExit("no error")
print("ok")
