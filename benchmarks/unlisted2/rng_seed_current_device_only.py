"""torch.cuda.manual_seed seeds the current GPU only; manual_seed_all seeds every GPU."""
# gpus: 2

import torch

# torch/cuda/random.py: manual_seed "Set the seed for generating random numbers for the current
# GPU"; manual_seed_all "... on all GPUs"; initial_seed "of the current GPU";
# torch.cuda.default_generators holds one generator per device.
torch.cuda.manual_seed_all(5)
torch.cuda.manual_seed(9)
assert torch.cuda.initial_seed() == 9
with torch.cuda.device(1):
    assert torch.cuda.initial_seed() == 5
assert len(torch.cuda.default_generators) == 2
assert torch.cuda.default_generators[1].initial_seed() == 5
assert torch.cuda.default_generators[0].initial_seed() == 9
assert len(torch.cuda.get_rng_state_all()) == 2
torch.cuda.set_device(1)
torch.cuda.manual_seed(11)
assert torch.cuda.default_generators[1].initial_seed() == 11
assert torch.cuda.default_generators[0].initial_seed() == 9
print("ok")
