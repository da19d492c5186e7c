"""Flash-only SDPA with head_dim 512 finds no kernel (RuntimeError); with all backends it runs."""

import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# aten/src/ATen/native/transformers/cuda/sdp_utils.cpp check_head_dim_size_flash: flash needs
# q,k,v last dimension <= 256 ("Flash attention requires q,k,v to have the same last dimension
# and to be less than or equal to 256."); with only FLASH_ATTENTION allowed select_sdp_backend
# finds none and _fused_sdp_choice fails with "No available kernel. Aborting execution."
# (RuntimeError). With every backend allowed the math backend (at least) takes it.
q = torch.randn(1, 2, 16, 512, device="cuda", dtype=torch.float16)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        try:
            F.scaled_dot_product_attention(q, q, q)
        except RuntimeError as e:
            assert "No available kernel" in str(e), str(e)
        else:
            raise SystemExit("flash accepted head_dim 512")
out = F.scaled_dot_product_attention(q, q, q)
assert out.shape == (1, 2, 16, 512) and out.dtype == torch.float16 and out.is_cuda
print("ok")
