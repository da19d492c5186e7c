"""GradScaler refuses to unscale fp16 gradients: ValueError "Attempting to unscale FP16
gradients.".
"""

import torch

# torch/amp/grad_scaler.py _unscale_grads_ (called by unscale_ / step with allow_fp16=False):
# raise ValueError("Attempting to unscale FP16 gradients.").
m = torch.nn.Linear(4, 2).cuda().half()
opt = torch.optim.SGD(m.parameters(), lr=0.1)
sc = torch.amp.GradScaler("cuda")
loss = m(torch.ones(3, 4, device="cuda", dtype=torch.float16)).float().sum()
sc.scale(loss).backward()
assert m.weight.grad.dtype == torch.float16
try:
    sc.step(opt)
except ValueError as e:
    assert str(e) == "Attempting to unscale FP16 gradients.", str(e)
else:
    raise SystemExit("no error")
print("ok")
