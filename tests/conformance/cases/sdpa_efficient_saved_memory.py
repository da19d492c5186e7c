"""The memory-efficient attention kernel keeps its output and a padded log-sum-exp on the GPU.

GPU: on an A100 (sm_80), F.scaled_dot_product_attention in fp32 with inputs that require
grad runs the memory-efficient kernel (flash takes fp16/bf16 only). Its forward allocates
the output (B, H, L, D) in the input dtype and the log-sum-exp (B, H, ceil(L/32)*32) in fp32,
padded to a multiple of 32 rows, on the device; its philox seed and offset are not device
tensors. For B=4, H=4, L=16, D=16: 16 KiB + 2 KiB = 18432 bytes more allocated after the
forward, in both value modes (real values must account the GPU kernel's tensors, not the
CPU kernel that computes the values: the CPU flash kernel's log-sum-exp is unpadded; with
placeholders, the meta seed and offset must not be counted on the device).
Source: torch/_meta_registrations.py meta__scaled_dot_product_efficient_attention
(logsumexp_dim = ceil(M / 32) * 32; seed and offset on "meta", Note [Seed and Offset]);
aten/src/ATen/native/transformers/cuda/attention.cu (_efficient_attention_forward,
kAlignLSE = 32); torch/backends/cuda sdp_kernel selection (flash needs fp16/bf16). Found by
tests/test_sim_values.py (real vs placeholder memory of a transformer step).
"""

import torch
import torch.nn.functional as F

q, k, v = (torch.randn(4, 4, 16, 16, device="cuda", requires_grad=True) for _ in range(3))
before = torch.cuda.memory_allocated()
out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
grew = torch.cuda.memory_allocated() - before
assert grew == 16384 + 2048, grew
out.sum().backward()
assert q.grad is not None and q.grad.is_cuda

EXPECT = {
    "gpu": "A100 40GB",
    "notes": [r"memory-efficient kernel"],
    "needs": {"capability": [5, 0]},  # fp32 takes the memory-efficient kernel on any sm50+
}
