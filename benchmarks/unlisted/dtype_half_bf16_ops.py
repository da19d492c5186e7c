"""fp16 and bf16 matmul, conv2d, layer_norm and softmax run on an H100 and keep their dtype."""

import torch
import torch.nn.functional as F

# aten CUDA kernels dispatch on AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, ...)
# (Blas.cpp addmm_out_cuda_impl, cudnn conv, layer_norm_kernel.cu, SoftMax.cu).
for dt in (torch.float16, torch.bfloat16):
    a = torch.randn(32, 64, device="cuda", dtype=dt)
    w = torch.randn(64, 16, device="cuda", dtype=dt)
    assert (a @ w).dtype == dt
    img = torch.randn(2, 3, 16, 16, device="cuda", dtype=dt)
    k = torch.randn(8, 3, 3, 3, device="cuda", dtype=dt)
    assert F.conv2d(img, k).dtype == dt
    assert F.layer_norm(a, (64,)).dtype == dt
    assert F.softmax(a, dim=-1).dtype == dt
print("ok")
