"""A model on the GPU fed a CPU batch raises in its first Linear layer, naming mat1.

GPU: "Expected all tensors to be on the same device, but got mat1 is on cpu, different from
other tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)".
Source: aten/src/ATen/core/op_registration/adaption.cpp common_device_check_failure, method
names from torchgen/dest/register_dispatch_key.py; the message is quoted verbatim in the
Squidiff issue thread (train_util.py label device placement).
"""

import torch

model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).cuda()
out = model(torch.randn(2, 4))

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"Expected all tensors to be on the same device, but got mat1 is on cpu, different from other tensors on cuda:0 \(when checking argument in method wrapper_CUDA_addmm\)",
        "line": 13,
    },
}
