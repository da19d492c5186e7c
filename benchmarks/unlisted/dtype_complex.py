"""complex64 matmul, abs and FFT on CUDA give the CPU's results to float tolerance."""

import torch

# Blas.cpp addmm_cuda dispatches complex; cuFFT handles complex64
#   (aten/src/ATen/native/cuda/SpectralOps.cpp).
a = torch.randn(8, 8, dtype=torch.complex64)
g = a.cuda()
assert (g @ g).dtype == torch.complex64
assert torch.allclose((g @ g).cpu(), a @ a, atol=1e-4)
assert g.abs().dtype == torch.float32
assert torch.allclose(torch.fft.fft(g).cpu(), torch.fft.fft(a), atol=1e-4)
print("ok")
