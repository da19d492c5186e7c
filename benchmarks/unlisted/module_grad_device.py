"""After backward on CUDA, .grad lives on the parameter's device with its dtype; zero_grad() sets
None.
"""

import torch

# torch/csrc/autograd AccumulateGrad: the gradient has the variable's device and dtype;
# torch/optim/optimizer.py zero_grad(set_to_none=True) default.
m = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.1)
m(torch.randn(2, 4, device="cuda")).pow(2).mean().backward()
assert m.weight.grad.device == torch.device("cuda:0") and m.weight.grad.dtype == torch.float32
opt.step()
opt.zero_grad()
assert m.weight.grad is None
print("ok")
