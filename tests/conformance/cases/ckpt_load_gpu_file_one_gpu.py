"""Loading a file saved on cuda:1 on a machine with one GPU fails unless mapped.

GPU (1 GPU): torch.load without map_location raises "Attempting to deserialize object on
CUDA device 1 but torch.cuda.device_count() is 1. Please use torch.load with map_location
to map your storages to an existing device."
Source: torch/serialization.py validate_cuda_device.
"""

from pathlib import Path

import torch

path = Path(__file__).parent.parent / "data" / "gpu_saved.pt"
assert torch.load(path, map_location="cuda:0")["extra"].device.index == 0
ckpt = torch.load(path)

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"Attempting to deserialize object on CUDA device 1 but torch\.cuda\.device_count\(\) is 1\. Please use torch\.load with map_location to map your storages to an existing device\.",
        "line": "ckpt = torch.load(path)",
    },
}
