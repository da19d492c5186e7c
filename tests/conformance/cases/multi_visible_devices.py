"""CUDA_VISIBLE_DEVICES set before the script starts limits the devices torch sees.

GPU: with CUDA_VISIBLE_DEVICES=1 on a 2-GPU machine, torch.cuda.device_count() is 1 and
cuda:1 is an invalid device ordinal.
Source: CUDA C Programming Guide, "CUDA Environment Variables" (CUDA_VISIBLE_DEVICES);
torch/cuda/__init__.py _parse_visible_devices.
"""

import torch

assert torch.cuda.device_count() == 1
torch.ones(1, device="cuda:0")
torch.ones(1, device="cuda:1")

EXPECT = {
    "gpus": 2,
    "env": {"CUDA_VISIBLE_DEVICES": "1"},
    "exit": 1,
    "error": {
        "type": "AcceleratorError",
        "message": r"CUDA error: invalid device ordinal.*",
        "line": 13,
    },
}
