"""*_like and clone on a cuda tensor keep its strides (channels_last, transposed):
preserve_format.
"""

import torch

# docs/source/tensor_attributes.rst (torch.memory_format) and _torch_docs.py (empty_like, clone):
# the default memory_format=torch.preserve_format keeps the input's strides when it is
# non-overlapping and dense.
x = torch.randn(2, 3, 4, 5, device="cuda").to(memory_format=torch.channels_last)
assert x.stride() == (60, 1, 15, 3), x.stride()
for y in (
    torch.empty_like(x),
    torch.zeros_like(x),
    torch.ones_like(x),
    torch.randn_like(x),
    x.clone(),
):
    assert y.is_cuda and y.stride() == (60, 1, 15, 3), y.stride()
t = torch.randn(3, 4, device="cuda").t()
assert torch.ones_like(t).stride() == (1, 4)
# An explicit contiguous_format gives row-major strides.
assert torch.empty_like(x, memory_format=torch.contiguous_format).stride() == (60, 20, 5, 1)
# TensorIterator output strides follow the (single, dense) input (TensorIterator.cpp, NOTE:
# [Computing output strides]).
assert (x + 1).is_contiguous(memory_format=torch.channels_last)
print("ok")
