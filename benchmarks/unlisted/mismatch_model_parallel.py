"""Model parallel by hand: layer 1 on cuda:0, layer 2 on cuda:1, .to() between; backward fills
grads on each device.
"""
# gpus: 2

import torch

# PyTorch tutorial "Single-Machine Model Parallel Best Practices": moving activations with
# .to('cuda:1'); autograd's ToCopyBackward0 returns the gradient to the source device.
a = torch.nn.Linear(16, 16).to("cuda:0")
b = torch.nn.Linear(16, 4).to("cuda:1")
x = torch.randn(8, 16, device="cuda:0")
out = b(a(x).relu().to("cuda:1"))
assert out.device == torch.device("cuda:1")
out.sum().backward()
assert a.weight.grad.device == torch.device("cuda:0")
assert b.weight.grad.device == torch.device("cuda:1")
print("ok")
