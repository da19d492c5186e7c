"""TF32 flags: matmul off and cuDNN on by default; set_float32_matmul_precision and allow_tf32
track each other.
"""

import torch

# docs/source/notes/cuda.rst "TensorFloat-32 (TF32) on Ampere (and later) devices":
# torch.backends.cuda.matmul.allow_tf32 defaults to False (since 1.12), torch.backends.cudnn.
# allow_tf32 to True; torch/__init__.py set_float32_matmul_precision: "highest" (default) or
# "high"/"medium" which allow TF32; torch/backends/cuda/__init__.py cuBLASModule reads
# torch._C._get_cublas_allow_tf32; reduced-precision fp16/bf16 reductions default to True
# ("Reduced Precision Reduction in FP16/BF16 GEMMs").
m = torch.backends.cuda.matmul
assert m.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is True
assert torch.get_float32_matmul_precision() == "highest"
assert m.allow_fp16_reduced_precision_reduction is True
assert m.allow_bf16_reduced_precision_reduction is True
torch.set_float32_matmul_precision("high")
assert m.allow_tf32 is True
a = torch.randn(16, 16, device="cuda")
assert (a @ a).dtype == torch.float32
torch.set_float32_matmul_precision("highest")
assert m.allow_tf32 is False
m.allow_tf32 = True
assert torch.get_float32_matmul_precision() == "high"
m.allow_tf32 = False
assert torch.get_float32_matmul_precision() == "highest"
assert (a @ a).is_cuda
print("ok")
