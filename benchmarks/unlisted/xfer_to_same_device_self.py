"""x.to('cuda') / x.cuda() on a tensor already there return x itself; copy=True makes a new
tensor.
"""

import torch

# torch/_tensor_docs.py Tensor.to: "If the self Tensor already has the correct torch.dtype
# and torch.device, then self is returned. Otherwise, the returned tensor is a copy";
# Tensor.cuda: "If this object is already in CUDA memory and on the correct device, then no
# copy is performed and the original object is returned."
x = torch.randn(4, device="cuda")
assert x.to("cuda") is x
assert x.to("cuda:0") is x
assert x.cuda() is x
assert x.to(torch.float32) is x
y = x.to("cuda", copy=True)
assert y is not x and y.data_ptr() != x.data_ptr()
assert torch.equal(x, y)
print("ok")
