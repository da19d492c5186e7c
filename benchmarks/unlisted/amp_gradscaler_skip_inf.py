"""GradScaler: scale starts at 65536; an inf gradient skips the step and halves the scale."""

import torch

# torch/amp/grad_scaler.py: init_scale=2.0**16, backoff_factor=0.5; step() skips
# optimizer.step() when found_inf; update() multiplies the scale by backoff_factor.
p = torch.nn.Parameter(torch.ones(3, device="cuda"))
opt = torch.optim.SGD([p], lr=0.1)
scaler = torch.amp.GradScaler("cuda")
loss = (p * torch.tensor([1.0, float("inf"), 1.0], device="cuda")).sum()
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
assert torch.equal(p.detach().cpu(), torch.ones(3)), p
assert scaler.get_scale() == 32768.0, scaler.get_scale()
# a finite step then updates the parameter and keeps the scale
opt.zero_grad()
scaler.scale((p * 2).sum()).backward()
scaler.step(opt)
scaler.update()
assert torch.allclose(p.detach().cpu(), torch.full((3,), 0.8))
assert scaler.get_scale() == 32768.0
print("ok")
