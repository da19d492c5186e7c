"""x.to('cuda:3') with two GPUs raises RuntimeError 'invalid device ordinal'."""
# gpus: 2

import torch

# The copy to cuda:3 opens a CUDAGuard on device 3 (c10/cuda/impl/CUDAGuardImpl.h setDevice ->
# c10::cuda::SetDevice -> cudaSetDevice), which fails with cudaErrorInvalidDevice:
# "CUDA error: invalid device ordinal" (C10_CUDA_CHECK, c10/cuda/CUDAException.h).
x = torch.ones(4)
try:
    x.to("cuda:3")
except RuntimeError as e:
    assert "invalid device ordinal" in str(e), str(e)
else:
    raise SystemExit("no error")
print("ok")
