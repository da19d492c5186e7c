"""bfloat16 on a pre-Ampere GPU (T4, sm_75): supported by emulation, not natively.

GPU: torch.cuda.is_bf16_supported() is True and is_bf16_supported(including_emulation=False)
is False on a T4 with torch 2.13; bf16 tensors and autocast(dtype=bfloat16) work there
(slowly).
Source: torch/cuda/__init__.py is_bf16_supported (major >= 8, else tries a bf16 tensor:
_check_bf16_tensor_supported); torch 2.13 autocast accepts bf16 on CUDA.
"""

import torch

assert torch.cuda.get_device_capability() == (7, 5)
assert torch.cuda.is_bf16_supported()
assert not torch.cuda.is_bf16_supported(including_emulation=False)
lin = torch.nn.Linear(8, 8).cuda()
with torch.autocast("cuda", dtype=torch.bfloat16):
    out = lin(torch.randn(4, 8, device="cuda"))
assert out.dtype == torch.bfloat16

EXPECT = {"gpu": "T4"}
