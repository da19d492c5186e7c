"""torch.random.fork_rng restores the CUDA generator's state on exit."""

import torch

# torch/random.py fork_rng(devices=None, device_type="cuda"): saves get_rng_state for each
# device and sets it back in the finally block.
torch.cuda.manual_seed(1)
with torch.random.fork_rng(device_type="cuda"):
    torch.randn(100, device="cuda")
a = torch.randn(4, device="cuda")
torch.cuda.manual_seed(1)
assert torch.equal(a, torch.randn(4, device="cuda"))
print("ok")
