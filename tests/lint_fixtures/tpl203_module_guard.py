# near miss: the module stops at the top when there is no GPU
import sys

import torch

if not torch.cuda.is_available():
    sys.exit("this benchmark needs an NVIDIA GPU")

x = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
