"""int32 matmul on CUDA raises RuntimeError "... not implemented for 'Int'"."""

import torch

# aten/src/ATen/native/cuda/Blas.cpp addmm_out_cuda_impl dispatches with
# AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2(kHalf, kBFloat16, ..., "addmm_cuda"), so an
# integer dtype raises "\"addmm_cuda\" not implemented for 'Int'".
a = torch.ones(4, 4, dtype=torch.int32, device="cuda")
try:
    a @ a
except RuntimeError as e:
    assert "not implemented for 'Int'" in str(e), str(e)
else:
    raise SystemExit("no error")
print("ok")
