"""Cross-entropy with logits on the GPU and labels left on the CPU raises, naming target.

GPU: "Expected all tensors to be on the same device, but got target is on cpu, different
from other tensors on cuda:0 (when checking argument in method
wrapper_CUDA_nll_loss_forward)".
Source: cross_entropy = log_softmax + nll_loss (aten/src/ATen/native/LossNLL.cpp);
nll_loss_forward is structured with a CUDA kernel, checked by adaption.cpp.
"""

import torch
import torch.nn.functional as F

logits = torch.randn(4, 3, device="cuda", requires_grad=True)
labels = torch.tensor([0, 1, 2, 1])
loss = F.cross_entropy(logits, labels)

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"Expected all tensors to be on the same device, but got target is on cpu, different from other tensors on cuda:0 \(when checking argument in method wrapper_CUDA_nll_loss_forward\)",
        "line": 15,
    },
}
