"""CUDA random state: seeds, get/set_rng_state, fork_rng, and independence from the CPU's.

GPU: torch.manual_seed(s) seeds every CUDA generator (initial_seed() == s); restoring
get_rng_state() replays the same numbers; drawing on the GPU leaves the CPU's random
stream untouched.
Source: torch/random.py manual_seed (calls torch.cuda.manual_seed_all); torch/cuda/random.py;
CUDA and CPU have separate default generators (torch.cuda.default_generators).
"""

import torch

torch.manual_seed(7)
assert torch.cuda.initial_seed() == 7
cpu_expected = torch.randn(3)  # the CPU stream after seeding
torch.manual_seed(7)
_ = torch.randn(1000, device="cuda")  # GPU draws...
assert torch.equal(torch.randn(3), cpu_expected)  # ...do not move the CPU stream
state = torch.cuda.get_rng_state()
a = torch.rand(4, device="cuda")
torch.cuda.set_rng_state(state)
assert torch.equal(torch.rand(4, device="cuda"), a)
with torch.random.fork_rng(devices=[0]):
    torch.rand(10, device="cuda")
assert not torch.equal(torch.rand(4, device="cuda"), a)
torch.cuda.manual_seed(3)
assert torch.cuda.initial_seed() == 3
torch.cuda.seed()

EXPECT = {"values": ["real"]}
