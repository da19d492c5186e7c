"""Legacy CUDA tensor constructors and torch.set_default_tensor_type with a CUDA type.

GPU: torch.cuda.FloatTensor(2, 3) is an uninitialised float32 tensor of that size on the
current GPU; torch.cuda.LongTensor([1, 2]) holds that data on the GPU. After
torch.set_default_tensor_type(torch.cuda.FloatTensor) (deprecated, but still in old code)
factories without a device make float32 tensors on the current GPU; setting
torch.FloatTensor back makes them CPU tensors again. x.type(torch.cuda.DoubleTensor) copies
a tensor to the GPU as float64, x.type("torch.FloatTensor") back to the host.
Source: torch/csrc/utils/tensor_new.cpp legacy_tensor_ctor (sizes or a data sequence);
torch/__init__.py set_default_tensor_type ("the default floating point tensor type ...
deprecated as of PyTorch 2.1, please use torch.set_default_dtype() and
torch.set_default_device()"); torch/_tensor_docs.py Tensor.type.
"""

import torch

x = torch.cuda.FloatTensor(2, 3)
assert x.shape == (2, 3) and x.dtype == torch.float32 and x.device == torch.device("cuda", 0)
ids = torch.cuda.LongTensor([1, 2])
assert ids.is_cuda and ids.dtype == torch.int64 and ids.tolist() == [1, 2]

torch.set_default_tensor_type(torch.cuda.FloatTensor)
z = torch.zeros(3)
assert z.is_cuda and z.dtype == torch.float32, z.device
torch.set_default_tensor_type(torch.FloatTensor)
assert not torch.zeros(3).is_cuda

d = torch.arange(3.0).type(torch.cuda.DoubleTensor)
assert d.is_cuda and d.dtype == torch.float64 and d.tolist() == [0.0, 1.0, 2.0]
back = d.type("torch.FloatTensor")
assert not back.is_cuda and back.dtype == torch.float32

EXPECT = {"values": ["real"]}
