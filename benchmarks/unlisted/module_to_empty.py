"""A meta-device module moved with to_empty(device='cuda') has uninitialised cuda parameters of the
right size.
"""

import torch

# torch/nn/modules/module.py to_empty: "Move the parameters and buffers to the specified device
# without copying storage" (torch.empty_like(t, device=device)).
with torch.device("meta"):
    m = torch.nn.Linear(256, 128)
assert torch.cuda.memory_allocated() == 0
m.to_empty(device="cuda")
assert m.weight.device == torch.device("cuda:0") and m.weight.shape == (128, 256)
assert torch.cuda.memory_allocated() == 128 * 256 * 4 + 512  # bias 512 B rounds to 512
m.reset_parameters()
assert m.weight.abs().max().item() <= 1 / 16 + 1e-6
print("ok")
