"""is_tf32_supported() is True on an H100; the allocator backend is native; sync debug mode 0."""

import torch

# torch/cuda/__init__.py is_tf32_supported -> is_bf16_supported(including_emulation=False):
# compute capability >= 8.0; torch/cuda/memory.py get_allocator_backend -> "native" unless
# PYTORCH_CUDA_ALLOC_CONF selects cudaMallocAsync; get_sync_debug_mode() defaults to 0.
assert torch.cuda.is_tf32_supported()
assert torch.cuda.get_allocator_backend() == "native"
assert torch.cuda.get_sync_debug_mode() == 0
assert not torch.cuda.is_current_stream_capturing()
print("ok")
