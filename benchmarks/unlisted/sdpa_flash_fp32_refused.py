"""sdpa_kernel(FLASH_ATTENTION) with float32 inputs: no kernel, RuntimeError 'No available
kernel'.
"""

import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# aten/src/ATen/native/transformers/cuda/sdp_utils.cpp can_use_flash_attention ->
# check_tensor_dtype: flash supports {Half, BFloat16} only ("Expected query, key and value
# to all be of dtype: {Half, BFloat16}"); select_sdp_backend then raises
# "No available kernel. Aborting execution."
q = torch.randn(1, 2, 16, 64, device="cuda")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, q, q)
    except RuntimeError as e:
        assert "No available kernel" in str(e), str(e)
    else:
        raise SystemExit("no error")
assert any("dtype" in str(x.message) for x in w), [str(x.message) for x in w]
print("ok")
