"""torch.cuda.manual_seed(s) makes CUDA random draws repeat; torch.manual_seed seeds CUDA too."""

import torch

# torch/cuda/random.py manual_seed; torch/random.py manual_seed: "Sets the seed for generating
# random numbers on all devices" (calls torch.cuda.manual_seed_all); initial_seed() returns it.
torch.cuda.manual_seed(123)
a = torch.randn(100, device="cuda")
torch.cuda.manual_seed(123)
b = torch.randn(100, device="cuda")
assert torch.equal(a, b)
torch.manual_seed(7)
assert torch.cuda.initial_seed() == 7
c = torch.rand(5, device="cuda")
torch.manual_seed(7)
assert torch.equal(c, torch.rand(5, device="cuda"))
assert not torch.equal(a, torch.randn(100, device="cuda"))
print("ok")
