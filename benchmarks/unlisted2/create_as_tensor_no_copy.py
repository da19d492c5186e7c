"""torch.as_tensor(cuda_t) is cuda_t; torch.tensor(cuda_t) copies and warns to use clone()."""

import warnings

import torch

# _torch_docs.py as_tensor: "If data is already a tensor with the requested dtype and device
# then data itself is returned". torch/csrc/utils/tensor_new.cpp (internal_new_from_data with
# copy_warn): torch.tensor(t) warns "To copy construct from a tensor, it is recommended to use
# sourceTensor.detach().clone() ..." (the 2.14.1 wheel's text; older releases said
# clone().detach()).
t = torch.ones(3, device="cuda")
assert torch.as_tensor(t) is t
assert torch.as_tensor(t, device="cuda") is t
h = torch.as_tensor(t, dtype=torch.float16)
assert h is not t and h.dtype == torch.float16 and h.is_cuda
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    c = torch.tensor(t)
assert any("To copy construct from a tensor" in str(w.message) for w in caught), [
    str(w.message) for w in caught
]
assert c.is_cuda and c.data_ptr() != t.data_ptr()
c[0] = 5
assert t[0].item() == 1.0
print("ok")
