"""NumPy reads CPU tensors as always while a GPU is in use; a CUDA tensor is refused.

GPU: np.asarray(cpu_tensor), np.zeros_like(cpu_tensor) and np.array(cpu_tensor,
dtype=np.float64) work: NumPy calls Tensor.__array__(dtype=None) (and with copy= on NumPy
2), which returns self.numpy() or its astype(dtype). np.asarray(cuda_tensor) raises
TypeError "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the
tensor to host memory first."
Source: torch/_tensor.py Tensor.__array__; torch/csrc/utils/tensor_numpy.cpp (the CUDA
message). Found by skorch's test_predict_nonlinearity_called_with_predict under
pytest --sim-gpu.
"""

import numpy as np
import torch

cpu = torch.tensor([1.0, 2.0])
assert np.asarray(cpu).tolist() == [1.0, 2.0]
assert np.zeros_like(cpu).tolist() == [0.0, 0.0]
assert np.array(cpu, dtype=np.float64).dtype == np.float64
gpu = torch.ones(2, device="cuda")
try:
    np.asarray(gpu)
except TypeError as e:
    assert "can't convert cuda:0 device type tensor to numpy" in str(e), e
else:
    raise AssertionError("np.asarray read a CUDA tensor")

EXPECT = {}
