"""torch._scaled_mm (fp8 GEMM) needs compute capability 8.9 or newer.

GPU: on an A100 (sm_80) torch._scaled_mm raises RuntimeError "torch._scaled_mm is only
supported on CUDA devices with compute capability >= 9.0 or 8.9, or ROCm MI300+".
Source: aten/src/ATen/native/cuda/Blas.cpp (_scaled_mm_out_cuda: _scaled_mm_allowed_device).
"""

import torch

a = torch.randn(16, 32, device="cuda").to(torch.float8_e4m3fn)
b = torch.randn(16, 32, device="cuda").to(torch.float8_e4m3fn).t()
one = torch.tensor(1.0, device="cuda")
out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

EXPECT = {
    "gpu": "A100 80GB",
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"torch\._scaled_mm is only supported on CUDA devices with compute capability >= 9\.0 or 8\.9, or ROCm MI300\+",
        "line": 13,
    },
}
