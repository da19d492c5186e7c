"""On cuda, .to/.cuda(memory_format=channels_last) restride; asking for the layout it has returns
self.
"""

import torch

# torch/_tensor_docs.py Tensor.to / Tensor.cuda (memory_format argument);
# aten/src/ATen/native/TensorConversions.cpp to_will_alias: same dtype/device/layout and
# (Preserve or suggest_memory_format() == memory_format) and not copy -> returns self.
x = torch.randn(2, 3, 4, 5, device="cuda")
cl = x.to(memory_format=torch.channels_last)
assert cl.stride() == (60, 1, 15, 3) and cl.is_contiguous(memory_format=torch.channels_last)
assert cl.data_ptr() != x.data_ptr()
assert cl.to(memory_format=torch.channels_last) is cl
assert torch.equal(cl, x)
c2 = torch.randn(2, 3, 4, 5).cuda(memory_format=torch.channels_last)
assert c2.is_cuda and c2.stride() == (60, 1, 15, 3)
back = cl.contiguous()
assert back.stride() == (60, 20, 5, 1) and back.is_contiguous()
assert x.contiguous() is x  # _tensor_docs.py contiguous: "If self is already ... returns self"
print("ok")
