"""GradScaler: default scale 65536; scale(loss) multiplies; with growth_interval=1 a good step
doubles it.
"""

import torch

# torch/amp/grad_scaler.py: init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
# growth_interval=2000; get_scale(); state_dict's five entries ("scale", "growth_factor",
# "backoff_factor", "growth_interval", "_growth_tracker"); update() calls
# torch._amp_update_scale_ (aten/src/ATen/native/cuda/AmpKernels.cu: no inf -> tracker + 1,
# and at growth_interval scale *= growth_factor, tracker = 0).
assert torch.amp.GradScaler("cuda").get_scale() == 65536.0
m = torch.nn.Linear(3, 1).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.01)
sc = torch.amp.GradScaler("cuda", init_scale=4.0, growth_interval=1)
loss = m(torch.ones(2, 3, device="cuda")).sum()
scaled = sc.scale(loss)
assert scaled.is_cuda and torch.allclose(scaled, loss * 4.0)
scaled.backward()
sc.step(opt)
sc.update()
assert sc.get_scale() == 8.0, sc.get_scale()
sd = sc.state_dict()
assert set(sd) == {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}
assert sd["scale"] == 8.0 and sd["_growth_tracker"] == 0 and sd["growth_interval"] == 1
print("ok")
