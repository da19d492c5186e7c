"""Factories on cuda take torch's default dtypes: float32 for floats, int64 for ints, bool,
complex64.
"""

import torch

# torch/_torch_docs.py (torch.tensor, torch.arange, torch.full): the dtype is inferred from the
# data; Python floats give torch.get_default_dtype() (float32), ints give int64, bools give
# bool, complex gives the complex type matching the default dtype; torch.full infers its dtype
# from fill_value (since 1.8). The device does not take part in the inference.
assert torch.zeros(3, device="cuda").dtype == torch.float32
assert torch.tensor([1, 2], device="cuda").dtype == torch.int64
assert torch.tensor([1.5], device="cuda").dtype == torch.float32
assert torch.tensor([True], device="cuda").dtype == torch.bool
assert torch.tensor([1 + 2j], device="cuda").dtype == torch.complex64
assert torch.arange(5, device="cuda").dtype == torch.int64
assert torch.arange(0, 1, 0.25, device="cuda").dtype == torch.float32
assert torch.full((2,), 7, device="cuda").dtype == torch.int64
assert torch.full((2,), True, device="cuda").dtype == torch.bool
assert torch.full((2,), 1.5, device="cuda").dtype == torch.float32
# torch.set_default_dtype (torch/__init__.py): floating factories and complex inference follow.
torch.set_default_dtype(torch.float64)
assert torch.ones(2, device="cuda").dtype == torch.float64
assert torch.tensor([1.5], device="cuda").dtype == torch.float64
assert torch.tensor([1 + 2j], device="cuda").dtype == torch.complex128
assert torch.tensor([1, 2], device="cuda").dtype == torch.int64
print("ok")
