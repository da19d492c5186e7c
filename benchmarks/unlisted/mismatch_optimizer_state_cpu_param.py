"""Module moved after optimizer creation: Adam keeps working (state is created lazily on the
param's device).
"""

import torch

# torch/optim/adam.py _init_group: state["exp_avg"] = torch.zeros_like(p, memory_format=...)
# is created at the first step, on p's device; state["step"] is a CPU float32 tensor unless
# capturable or fused ("torch.tensor(0.0, dtype=_get_scalar_dtype())").
m = torch.nn.Linear(8, 8)
opt = torch.optim.Adam(m.parameters(), lr=1e-3)
m.cuda()  # Module.to moves parameters in place (param.data), so opt still holds them
m(torch.randn(2, 8, device="cuda")).sum().backward()
opt.step()
st = opt.state[m.weight]
assert st["exp_avg"].device.type == "cuda"
assert st["exp_avg_sq"].device.type == "cuda"
assert st["step"].device.type == "cpu" and st["step"].item() == 1.0
print("ok")
