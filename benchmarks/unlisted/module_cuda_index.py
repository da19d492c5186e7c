"""Module.cuda(1) and Module.to(torch.device('cuda', 1)) put every parameter on cuda:1."""
# gpus: 2

import torch

# torch/nn/modules/module.py cuda(device=None): "the parameters and buffers ... will be copied
# to that device"; to(device).
m = torch.nn.Conv2d(3, 4, 3).cuda(1)
assert {p.device for p in m.parameters()} == {torch.device("cuda:1")}
m2 = torch.nn.LayerNorm(4).to(torch.device("cuda", 1))
assert m2.weight.device == torch.device("cuda:1")
y = m(torch.randn(1, 3, 8, 8, device="cuda:1"))
assert y.device == torch.device("cuda:1")
print("ok")
