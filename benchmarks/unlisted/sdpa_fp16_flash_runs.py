"""fp16 SDPA with flash forced runs on an H100 and matches the math backend."""

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# sdp_utils.cpp: flash needs sm80+ and fp16/bf16, head_dim <= 256 and a multiple of 8:
# an H100 (sm90) qualifies; the result agrees with math attention to fp16 tolerance.
q, k, v = (torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.float16) for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
with sdpa_kernel(SDPBackend.MATH):
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
assert out.shape == (2, 4, 128, 64) and out.dtype == torch.float16
assert torch.allclose(out.float(), ref.float(), atol=2e-2), (out.float() - ref.float()).abs().max()
print("ok")
