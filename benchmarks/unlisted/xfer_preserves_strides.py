"""A transposed CPU tensor moved with .cuda() keeps its strides (memory_format=preserve_format)."""

import torch

# aten/src/ATen/native/TensorConversions.cpp _to_copy: with preserve_format and a
# non-overlapping, dense input, "empty_strided(self.sizes(), self.strides(), ...)": strides kept.
x = torch.arange(6.0).view(2, 3).t()
assert x.stride() == (1, 3)
g = x.cuda()
assert g.stride() == (1, 3) and not g.is_contiguous()
cl = torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last)
assert cl.to("cuda").is_contiguous(memory_format=torch.channels_last)
print("ok")
