"""CUDA_VISIBLE_DEVICES set inside the script before CUDA is first used takes effect.

GPU: setting os.environ["CUDA_VISIBLE_DEVICES"] = "0" before the first CUDA call makes
device_count() 1 on a 2-GPU machine (the CUDA runtime reads it when it initialises).
Source: CUDA C Programming Guide, "CUDA Environment Variables"; torch/cuda/__init__.py
device_count (computed lazily, on first use).
"""

import os

os.environ["CUDA_VISIBLE_DEVICES"] = "0"
import torch

assert torch.cuda.device_count() == 1, torch.cuda.device_count()

EXPECT = {"gpus": 2}
