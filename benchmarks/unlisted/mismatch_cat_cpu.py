"""torch.cat of a CUDA and a CPU tensor raises a RuntimeError about devices."""

import torch

# aten/src/ATen/native/TensorShape.cpp cat -> cat_out_cuda (check_cat...); the codegen device
# check on `tensors` reports "Expected all tensors to be on the same device".
try:
    torch.cat([torch.ones(2, device="cuda"), torch.ones(2)])
except RuntimeError as e:
    assert "Expected all tensors to be on the same device" in str(e), str(e)
else:
    raise SystemExit("no error")
print("ok")
