"""Optimizer.load_state_dict moves CPU-saved state to each param's device and dtype, except
'step'.
"""

import io

import torch

# torch/optim/optimizer.py Optimizer._process_value_according_to_param_policy: key "step" stays
# as it is unless fused/capturable; other floating state -> value.to(dtype=param.dtype,
# device=param.device).
p = torch.nn.Parameter(torch.randn(4, device="cuda"))
opt = torch.optim.Adam([p])
p.grad = torch.ones_like(p)
opt.step()
buf = io.BytesIO()
torch.save(opt.state_dict(), buf)
buf.seek(0)
sd = torch.load(buf, map_location="cpu")
assert sd["state"][0]["exp_avg"].device.type == "cpu"
q = torch.nn.Parameter(torch.randn(4, device="cuda", dtype=torch.float16))
opt2 = torch.optim.Adam([q])
opt2.load_state_dict(sd)
st = opt2.state[q]
assert st["exp_avg"].device == torch.device("cuda:0") and st["exp_avg"].dtype == torch.float16
assert st["exp_avg_sq"].is_cuda
assert st["step"].device.type == "cpu" and st["step"].dtype == torch.float32
print("ok")
