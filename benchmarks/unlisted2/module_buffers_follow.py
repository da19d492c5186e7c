"""Module.cuda()/.half() move buffers too (non-persistent ones included); integer buffers keep
their dtype.
"""

import torch

# torch/nn/modules/module.py: _apply converts parameters and buffers; Module.half "Casts all
# floating point parameters and buffers to half"; Module.to(dtype) only casts floating point /
# complex tensors; state_dict holds persistent buffers only (register_buffer persistent=False).
bn = torch.nn.BatchNorm1d(3)
bn.register_buffer("scratch", torch.zeros(2), persistent=False)
bn.cuda()
assert bn.running_mean.device == torch.device("cuda:0")
assert bn.num_batches_tracked.is_cuda and bn.num_batches_tracked.dtype == torch.int64
assert bn.scratch.is_cuda
bn(torch.randn(4, 3, device="cuda"))
assert bn.num_batches_tracked.item() == 1
bn.half()
assert bn.running_var.dtype == torch.float16 and bn.scratch.dtype == torch.float16
assert bn.num_batches_tracked.dtype == torch.int64
sd = bn.state_dict()
assert "scratch" not in sd and sd["running_mean"].device == torch.device("cuda:0")
assert all(not v.requires_grad for v in sd.values())
print("ok")
