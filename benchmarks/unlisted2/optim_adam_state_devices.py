"""Adam on cuda params: exp_avg/exp_avg_sq on cuda:0, 'step' a CPU float32 tensor unless
fused/capturable.
"""

import torch

# torch/optim/adam.py _init_group, note [special device hosting for step]: "Deliberately host
# `step` on CPU if both capturable and fused are off" (torch.tensor(0.0, dtype=_get_scalar_dtype(),
# device="cpu")); exp_avg = zeros_like(p); fused/capturable: step on p.device, float32.
p = torch.nn.Parameter(torch.randn(5, device="cuda"))
opt = torch.optim.Adam([p], lr=0.1)
p.grad = torch.ones_like(p)
opt.step()
st = opt.state[p]
assert st["exp_avg"].device == torch.device("cuda:0") and st["exp_avg_sq"].is_cuda
assert st["step"].device.type == "cpu" and st["step"].dtype == torch.float32
assert st["step"].item() == 1.0
q = torch.nn.Parameter(torch.randn(5, device="cuda"))
opt2 = torch.optim.Adam([q], lr=0.1, fused=True)
q.grad = torch.ones_like(q)
opt2.step()
assert opt2.state[q]["step"].device == torch.device("cuda:0")
assert opt2.state[q]["step"].dtype == torch.float32
print("ok")
