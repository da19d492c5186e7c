"""Under CUDA autocast, F.binary_cross_entropy raises the 'unsafe to autocast' RuntimeError; the
logits form runs in fp32.
"""

import torch
import torch.nn.functional as F

# aten/src/ATen/autocast_mode.cpp binary_cross_entropy_banned: AT_ERROR("torch.nn.functional.
# binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n ... binary_cross_entropy_
# with_logits and BCEWithLogits are\nsafe to autocast."); binary_cross_entropy_with_logits is in
# the fp32 list (docs/source/amp.rst).
x = torch.randn(4, device="cuda")
t = torch.rand(4, device="cuda")
with torch.autocast("cuda"):
    p = torch.sigmoid(torch.mm(x[None], x[:, None]).flatten())
    try:
        F.binary_cross_entropy(p, t[:1])
    except RuntimeError as e:
        assert str(e).startswith(
            "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast."
        ), str(e)
        assert "binary_cross_entropy_with_logits" in str(e)
    else:
        raise SystemExit("no error")
    loss = F.binary_cross_entropy_with_logits(x.half(), t)
    assert loss.dtype == torch.float32 and loss.is_cuda
print("ok")
