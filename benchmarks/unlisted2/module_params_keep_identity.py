"""Module.cuda() returns the module and keeps the same Parameter objects, so an older optimizer
still works.
"""

import torch

# torch/nn/modules/module.py Module._apply: with
# torch.__future__.get_overwrite_module_params_on_conversion() False (the default) and
# compatible tensor types, "param.data = param_applied" - the Parameter object is kept and only
# its data moves; Module.cuda returns self.
m = torch.nn.Linear(3, 2)
w, b = m.weight, m.bias
opt = torch.optim.SGD(m.parameters(), lr=1.0)
assert m.cuda() is m
assert m.weight is w and m.bias is b
assert w.device == torch.device("cuda:0") and isinstance(w, torch.nn.Parameter)
assert w.is_leaf and w.requires_grad
before = w.detach().clone()
m(torch.ones(4, 3, device="cuda")).sum().backward()
opt.step()
assert not torch.equal(before, w.detach())  # the optimizer made before .cuda() updated it
assert torch.allclose(w.detach(), before - 4.0)
print("ok")
