"""CUDA random state: seeds, get/set_rng_state, fork_rng, and independence from the CPU's.

GPU: torch.manual_seed(s) seeds every CUDA generator (initial_seed() == s); restoring
get_rng_state() replays the same numbers; drawing on the GPU leaves the CPU's random
stream untouched. A CUDA generator's state is 16 bytes: its seed, then its Philox offset,
which random kernels move on in multiples of 4; a state whose offset is not one is refused
(DTensor's RNG tracker reads and moves that offset).
Source: aten/src/ATen/cuda/CUDAGeneratorImpl.cpp (get_state, set_state,
set_philox_offset_per_thread); torch/distributed/tensor/_random.py _PhiloxState; torch/random.py manual_seed (calls torch.cuda.manual_seed_all); torch/cuda/random.py;
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
assert state.dtype == torch.uint8 and state.shape == (16,)
offset = state[8:].view(torch.int64)
assert int(state[:8].view(torch.int64)) == 7 and int(offset) > 0 and int(offset) % 4 == 0
bad = state.clone()
bad[8:] = (offset + 1).view(torch.uint8)
try:
    torch.cuda.set_rng_state(bad)
except RuntimeError as e:
    assert "offset must be a multiple of 4" in str(e), e
else:
    raise AssertionError("an offset that is not a multiple of 4 was accepted")
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
