"""scaler.unscale_(opt) makes grads true-sized, so clip_grad_norm_ sees the real norm."""

import torch

# torch/amp/grad_scaler.py unscale_: "Divides ("unscales") the optimizer's gradient tensors
# by the scale factor"; docs "Gradient clipping" example in notes/amp_examples.
p = torch.nn.Parameter(torch.zeros(4, device="cuda"))
opt = torch.optim.SGD([p], lr=1.0)
scaler = torch.amp.GradScaler("cuda", init_scale=1024.0)
scaler.scale((p * torch.tensor([3.0, 4.0, 0.0, 0.0], device="cuda")).sum()).backward()
assert torch.allclose(p.grad.cpu(), torch.tensor([3072.0, 4096.0, 0, 0]))
scaler.unscale_(opt)
norm = torch.nn.utils.clip_grad_norm_([p], max_norm=1.0)
assert abs(norm.item() - 5.0) < 1e-5, norm
scaler.step(opt)
scaler.update()
assert torch.allclose(p.detach().cpu(), torch.tensor([-0.6, -0.8, 0.0, 0.0]), atol=1e-5)
print("ok")
