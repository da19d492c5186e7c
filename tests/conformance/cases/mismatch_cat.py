"""torch.cat of a CUDA and a CPU tensor raises, naming the tensors argument.

GPU: "Expected all tensors to be on the same device, but got tensors is on cpu, different
from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_cat)".
Source: native_functions.yaml (cat is structured with a CUDA kernel and the default
device_check) + adaption.cpp check_and_update_common_device over the tensor list.
"""

import torch

a = torch.ones(2, device="cuda")
b = torch.cat([a, torch.zeros(2)])

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"Expected all tensors to be on the same device, but got tensors is on cpu, different from other tensors on cuda:0 \(when checking argument in method wrapper_CUDA_cat\)",
        "line": 12,
    },
}
