"""A CUDA nn.Linear called on a CPU batch raises RuntimeError 'Expected all tensors to be on the
same device'.
"""

import torch

# aten/src/ATen/core/op_registration / torchgen's device check
#   (c10::impl::check_and_update_common_device):
# "Expected all tensors to be on the same device, but found at least two devices, ..."
m = torch.nn.Linear(4, 2).cuda()
try:
    m(torch.randn(3, 4))
except RuntimeError as e:
    assert "Expected all tensors to be on the same device" in str(e), str(e)
else:
    raise SystemExit("no error")
print("ok")
