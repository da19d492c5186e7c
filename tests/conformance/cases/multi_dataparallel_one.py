"""nn.DataParallel on one GPU runs the module directly.

GPU: with a single visible GPU DataParallel calls the module itself (no replicas).
Source: torch/nn/parallel/data_parallel.py DataParallel.forward (len(device_ids) == 1).
"""

import torch
from torch import nn

dp = nn.DataParallel(nn.Linear(8, 2)).cuda()
out = dp(torch.randn(4, 8, device="cuda"))
assert out.device == torch.device("cuda", 0) and out.shape == (4, 2)
out.sum().backward()

EXPECT = {}
