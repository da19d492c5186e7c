"""Under CUDA autocast (fp16): matmul-like ops give fp16, exp/softmax/sum/layer_norm fp32, addcmul
the widest, relu as given.
"""

import torch
import torch.nn.functional as F

# docs/source/amp.rst "CUDA Ops that can autocast to float16" (mm, matmul, linear, conv2d, bmm,
# addmm, baddbmm), "... to float32" (exp, softmax, sum, layer_norm, log_softmax, ...), "CUDA Ops
# that promote to the widest input type" (addcmul, addcdiv, ...); ops not listed run in their
# inputs' type. Lists: aten/src/ATen/autocast_mode.cpp (KERNEL_CUDA ... lower_precision_fp /
# fp32 / promote). Default CUDA autocast dtype: float16 (torch/amp/autocast_mode.py).
a = torch.randn(8, 8, device="cuda")
h = torch.randn(8, 8, device="cuda", dtype=torch.float16)
with torch.autocast(device_type="cuda"):
    assert torch.mm(a, a).dtype == torch.float16
    assert torch.matmul(a, a).dtype == torch.float16
    assert torch.bmm(a[None], a[None]).dtype == torch.float16
    assert torch.addmm(a, a, a).dtype == torch.float16
    assert F.linear(a, a).dtype == torch.float16
    assert F.conv2d(a[None, None], a[None, None, :3, :3]).dtype == torch.float16
    assert torch.exp(h).dtype == torch.float32
    assert torch.softmax(h, -1).dtype == torch.float32
    assert F.log_softmax(h, -1).dtype == torch.float32
    assert torch.sum(h).dtype == torch.float32
    assert F.layer_norm(h, (8,)).dtype == torch.float32
    assert torch.addcmul(a, h, h).dtype == torch.float32
    assert torch.relu(h).dtype == torch.float16
    assert torch.relu(a).dtype == torch.float32
    assert (h + a).dtype == torch.float32  # ordinary type promotion
assert torch.mm(a, a).dtype == torch.float32
print("ok")
