"""A CPU tensor indexed by a CUDA index tensor raises PyTorch's own error.

GPU: RuntimeError "indices should be either on cpu or on the same device as the indexed
tensor (cpu)".
Source: aten/src/ATen/native/TensorAdvancedIndexing.cpp check_indices_on_cpu_or_selfdevice;
the message is quoted in ultralytics/yolov7 and captum issue threads.
"""

import torch

table = torch.arange(10.0)
idx = torch.tensor([1, 2], device="cuda")
print(table[idx])

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"indices should be either on cpu or on the same device as the indexed tensor \(cpu\)",
        "line": 13,
    },
}
