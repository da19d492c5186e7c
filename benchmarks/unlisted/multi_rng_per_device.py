"""manual_seed_all seeds every GPU alike: the same draws on cuda:0 and cuda:1."""
# gpus: 2

import torch

# torch/cuda/random.py manual_seed_all: each device's default generator gets the seed; every
# device runs the same Philox stream for the same seed and offset.
torch.cuda.manual_seed_all(42)
a = torch.randn(16, device="cuda:0")
b = torch.randn(16, device="cuda:1")
assert torch.equal(a.cpu(), b.cpu())
assert torch.cuda.initial_seed() == 42
print("ok")
