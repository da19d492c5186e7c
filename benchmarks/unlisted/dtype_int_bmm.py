"""int64 bmm on CUDA raises "not implemented for 'Long'"; float bmm works."""

import torch

# aten/src/ATen/native/cuda/Blas.cpp baddbmm_out_cuda_impl:
#   AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2
# (kHalf, kBFloat16, ..., "bmm_cuda"): no integer kernel.
a = torch.ones(2, 3, 3, dtype=torch.int64, device="cuda")
try:
    torch.bmm(a, a)
except RuntimeError as e:
    assert "not implemented for 'Long'" in str(e), str(e)
else:
    raise SystemExit("no error")
assert torch.bmm(a.float(), a.float()).sum().item() == 54.0
print("ok")
