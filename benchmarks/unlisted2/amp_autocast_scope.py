"""CUDA autocast leaves CPU ops alone, reports its state and dtype, and can be disabled in a nested
block.
"""

import torch

# torch/amp/autocast_mode.py: autocast(device_type="cuda") enables the AutocastCUDA dispatch key
# only (CPU tensors go through AutocastCPU, not enabled); torch.is_autocast_enabled(device_type)
# and torch.get_autocast_dtype(device_type) (torch >= 2.4, torch/_C/__init__.pyi); a nested
# autocast(enabled=False) turns it off inside.
a = torch.randn(4, 4, device="cuda")
c = torch.randn(4, 4)
with torch.autocast("cuda"):
    assert torch.is_autocast_enabled("cuda") and not torch.is_autocast_enabled("cpu")
    assert torch.is_autocast_enabled()  # the no-argument form means CUDA
    assert torch.get_autocast_dtype("cuda") == torch.float16
    assert torch.mm(c, c).dtype == torch.float32
    with torch.autocast("cuda", enabled=False):
        assert torch.mm(a, a).dtype == torch.float32
        assert not torch.is_autocast_enabled("cuda")
    assert torch.mm(a, a).dtype == torch.float16
with torch.autocast("cuda", dtype=torch.bfloat16):
    assert torch.get_autocast_dtype("cuda") == torch.bfloat16
    assert torch.mm(a, a).dtype == torch.bfloat16
assert not torch.is_autocast_enabled("cuda")
print("ok")
