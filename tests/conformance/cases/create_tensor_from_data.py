"""torch.tensor / torch.as_tensor / torch.asarray with device="cuda" copy host data to the GPU.

GPU: the result lives on cuda:0 with the same values; making it is one host-to-device
copy of its bytes (the data is built on the host first).
Source: torch/csrc/utils/tensor_new.cpp internal_new_from_data — the tensor is created on
the CPU, then `tensor.to(device, ...)`; docs of torch.as_tensor ("copied ... if device
differs").
"""

import numpy as np
import torch

a = torch.tensor([1.0, 2.0, 3.0], device="cuda")
assert a.device == torch.device("cuda", 0) and a.is_cuda
assert a.tolist() == [1.0, 2.0, 3.0]
b = torch.as_tensor(np.arange(4, dtype=np.int64), device="cuda")
assert b.dtype == torch.int64 and b.device.type == "cuda"
c = torch.asarray([[1, 2], [3, 4]], device="cuda:0", dtype=torch.float16)
assert c.shape == (2, 2) and c.dtype == torch.float16 and c.is_cuda
assert torch.as_tensor(a, device="cuda") is a  # already there: no copy
assert a.new_tensor([5, 6]).device == a.device  # new_tensor follows self

EXPECT = {
    "values": ["real"],
    "transfers": {"h2d": {"count": 4, "bytes": 60}},
}
