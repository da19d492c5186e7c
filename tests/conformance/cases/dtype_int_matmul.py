"""CUDA has no integer matrix multiply: torch.mm on int64 CUDA tensors raises.

GPU: NotImplementedError '"addmm_cuda" not implemented for 'Long''; the CPU computes it.
Source: aten/src/ATen/native/cuda/Blas.cpp addmm_out_cuda_impl dispatches
AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2(Half, BFloat16, ..., "addmm_cuda"); quoted in
issue threads ("baddbmm_cuda" not implemented for 'Bool' / 'Float8_e4m3fn').
"""

import torch

a = torch.ones(2, 2, dtype=torch.long)
assert (a @ a).tolist() == [[2, 2], [2, 2]]  # fine on the host
b = a.cuda()
c = b @ b

EXPECT = {
    "exit": 1,
    "error": {
        "type": "NotImplementedError",
        "message": "\"addmm_cuda\" not implemented for 'Long'",
        "line": 14,
    },
}
