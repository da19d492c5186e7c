"""SDPA backend flags: flash, mem-efficient and math are enabled by default and can be turned
off.
"""

import torch

# torch/backends/cuda/__init__.py flash_sdp_enabled / enable_flash_sdp etc.; the globalContext
# defaults (aten/src/ATen/Context.h: sdp_flash=true, sdp_mem_efficient=true, sdp_math=true).
b = torch.backends.cuda
assert b.flash_sdp_enabled() and b.mem_efficient_sdp_enabled() and b.math_sdp_enabled()
b.enable_flash_sdp(False)
assert not b.flash_sdp_enabled()
q = torch.randn(1, 1, 8, 16, device="cuda", dtype=torch.float16)
out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
assert out.shape == q.shape
b.enable_flash_sdp(True)
print("ok")
