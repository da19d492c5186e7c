"""repr of a cuda tensor ends with device='cuda:0' (before dtype= and requires_grad=)."""

import torch

# torch/_tensor_str.py _str_intern, Note [Print tensor device]: device is printed when it is not
# the default device type (cpu) and comes first among the suffixes; then dtype= when the dtype
# is not the default for its kind; requires_grad=True is printed last.
assert repr(torch.ones(2, device="cuda")) == "tensor([1., 1.], device='cuda:0')"
assert (
    repr(torch.ones(2, device="cuda", dtype=torch.float16))
    == "tensor([1., 1.], device='cuda:0', dtype=torch.float16)"
)
assert repr(torch.arange(3, device="cuda")) == "tensor([0, 1, 2], device='cuda:0')"
assert (
    repr(torch.zeros(2, device="cuda", requires_grad=True))
    == "tensor([0., 0.], device='cuda:0', requires_grad=True)"
)
assert repr(torch.ones(2)) == "tensor([1., 1.])"
print("ok")
