"""SDPA with enable_gqa=True on cuda: 8 query heads over 2 kv heads give an 8-head fp16 output."""

import torch
import torch.nn.functional as F

# torch/nn/functional.py scaled_dot_product_attention (enable_gqa, torch >= 2.5): "If set to
# True, Grouped Query Attention (GQA) is enabled ... key and value heads are repeated"; output
# shape (N, ..., Hq, L, Ev), same dtype and device as query.
q = torch.randn(2, 8, 16, 64, device="cuda", dtype=torch.float16)
kv = torch.randn(2, 2, 16, 64, device="cuda", dtype=torch.float16)
out = F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True, is_causal=True)
assert out.shape == (2, 8, 16, 64) and out.dtype == torch.float16
assert out.device == torch.device("cuda:0")
ref = F.scaled_dot_product_attention(
    q, kv.repeat_interleave(4, dim=1), kv.repeat_interleave(4, dim=1), is_causal=True
)
assert torch.allclose(out.float(), ref.float(), atol=2e-2, rtol=2e-2)
print("ok")
