"""Tensor.type() names a cuda tensor 'torch.cuda.FloatTensor'; .type(...) converts by name or
dtype.
"""

import torch

# torch/_tensor_docs.py Tensor.type: "Returns the type if dtype is not provided, else casts this
# object to the specified type"; torch/csrc/autograd/python_variable_methods.cpp THPVariable_type:
# a dtype keeps the tensor's device, a type string ("torch.cuda.DoubleTensor") gives its device
# type and dtype; the legacy name of a CUDA float tensor is torch.cuda.FloatTensor.
x = torch.ones(2, device="cuda")
assert x.type() == "torch.cuda.FloatTensor", x.type()
assert x.half().type() == "torch.cuda.HalfTensor"
assert torch.ones(2, dtype=torch.int64, device="cuda").type() == "torch.cuda.LongTensor"
assert torch.ones(2).type() == "torch.FloatTensor"
d = x.type(torch.cuda.DoubleTensor)
assert d.dtype == torch.float64 and d.is_cuda
lng = torch.ones(2).type("torch.cuda.LongTensor")
assert lng.dtype == torch.int64 and lng.device == torch.device("cuda:0")
h = x.type(torch.float16)
assert h.dtype == torch.float16 and h.is_cuda
back = x.type("torch.FloatTensor")
assert back.device.type == "cpu"
assert x.type(torch.cuda.FloatTensor) is x
print("ok")
