"""Gradients flow back through .cuda(): a CPU leaf used on the GPU gets its .grad on the CPU."""

import torch

# torch/_tensor_docs.py / autograd: Tensor.to / cuda are differentiable copies (the result is not
# a leaf); the gradient of a leaf is accumulated on the leaf's own device
# (torch/csrc/autograd/functions/accumulate_grad.h).
w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
g = w.cuda()
assert g.requires_grad and not g.is_leaf and g.is_cuda
loss = (g * g).sum()
loss.backward()
assert w.grad is not None and w.grad.device.type == "cpu", w.grad
assert w.grad.tolist() == [2.0, 4.0, 6.0]
assert g.grad is None  # non-leaf: .grad not retained
print("ok")
