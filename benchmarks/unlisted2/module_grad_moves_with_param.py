"""Module.cuda() moves existing .grad tensors along with their parameters."""

import torch

# torch/nn/modules/module.py Module._apply: "if param_grad is not None: ... grad_applied =
# fn(param_grad)" then param.grad.data = grad_applied (or a new grad) - the gradient follows.
m = torch.nn.Linear(2, 1)
m(torch.ones(3, 2)).sum().backward()
assert m.weight.grad.device.type == "cpu"
g = m.weight.grad.clone()
m.cuda()
assert m.weight.grad is not None and m.weight.grad.device == torch.device("cuda:0")
assert torch.equal(m.weight.grad.cpu(), g)
m.double()
assert m.weight.grad.dtype == torch.float64 and m.weight.grad.is_cuda
print("ok")
