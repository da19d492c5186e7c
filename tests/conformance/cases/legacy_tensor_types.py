"""isinstance(t, torch.cuda.FloatTensor) is True for a float32 CUDA tensor, as are the other
legacy CUDA tensor types for their dtypes.

GPU: a float32 tensor on cuda:0 is an instance of torch.cuda.FloatTensor and not of
torch.FloatTensor; a CPU float32 tensor the other way round; an int64 CUDA tensor is a
torch.cuda.LongTensor. The legacy type objects answer isinstance by comparing the tensor's
dispatch key and dtype.
Source: torch/csrc/tensor/python_tensor.cpp Tensor_instancecheck. Found by skorch's
test_use_cuda_on_model under pytest --sim-gpu.
"""

import torch

x = torch.ones(2, device="cuda")
assert isinstance(x, torch.cuda.FloatTensor)
assert not isinstance(x, torch.FloatTensor)
assert isinstance(torch.ones(2), torch.FloatTensor)
assert not isinstance(torch.ones(2), torch.cuda.FloatTensor)
assert isinstance(torch.ones(2, dtype=torch.long, device="cuda"), torch.cuda.LongTensor)
assert x.type() == "torch.cuda.FloatTensor"

EXPECT = {}
