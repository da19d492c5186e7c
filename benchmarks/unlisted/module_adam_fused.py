"""Adam(fused=True) on CUDA params steps; its 'step' state is a CUDA tensor (a CPU one when not
fused).
"""

import torch

# torch/optim/adam.py _init_group: state["step"] = torch.zeros((), dtype=..., device=p.device)
# if group["capturable"] or group["fused"] else torch.tensor(0.0, ...) on the CPU.
m = torch.nn.Linear(8, 8).cuda()
opt = torch.optim.Adam(m.parameters(), lr=1e-2, fused=True)
w0 = m.weight.detach().clone()
m(torch.randn(4, 8, device="cuda")).sum().backward()
opt.step()
assert opt.state[m.weight]["step"].device.type == "cuda"
assert not torch.equal(w0, m.weight.detach())
print("ok")
