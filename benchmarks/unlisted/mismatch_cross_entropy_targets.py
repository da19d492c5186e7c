"""F.cross_entropy with CUDA logits and CPU targets raises the same-device RuntimeError."""

import torch
import torch.nn.functional as F

# aten nll_loss (CUDA) is generated with a device check on self/target/weight:
# "Expected all tensors to be on the same device, but found at least two devices".
logits = torch.randn(4, 10, device="cuda")
try:
    F.cross_entropy(logits, torch.tensor([1, 2, 3, 4]))
except RuntimeError as e:
    assert "Expected all tensors to be on the same device" in str(e), str(e)
else:
    raise SystemExit("no error")
print("ok")
