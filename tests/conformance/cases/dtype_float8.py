"""float8 tensors on CUDA: conversions work, matmul and arithmetic do not.

GPU: casting to torch.float8_e4m3fn and back works; x8 @ x8 raises NotImplementedError
'"addmm_cuda" not implemented for 'Float8_e4m3fn'' (fp8 GEMMs go through torch._scaled_mm).
Source: aten/src/ATen/native/cuda/Blas.cpp (addmm_cuda dispatches floating types plus Half
and BFloat16 only); transformers issue quoting '"baddbmm_cuda" not implemented for
'Float8_e4m3fn''.
"""

import torch

x = torch.randn(16, 16, device="cuda")
x8 = x.to(torch.float8_e4m3fn)
assert x8.dtype == torch.float8_e4m3fn and x8.to(torch.float32).shape == (16, 16)
y = x8 @ x8

EXPECT = {
    "exit": 1,
    "error": {
        "type": "NotImplementedError",
        "message": "\"addmm_cuda\" not implemented for 'Float8_e4m3fn'",
        "line": 15,
    },
}
