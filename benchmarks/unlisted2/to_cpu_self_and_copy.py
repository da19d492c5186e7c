"""x.cpu() of a CPU tensor is x; of a cuda tensor it is an independent, unpinned host copy."""

import torch

# torch/_tensor_docs.py Tensor.cpu: "If this object is already in CPU memory, then no copy is
# performed and the original object is returned."; a blocking device-to-host copy allocates
# ordinary (pageable) memory (TensorConversions.cpp _to_copy: pin_out only when non_blocking).
c = torch.arange(4.0)
assert c.cpu() is c
g = c.cuda()
h = g.cpu()
assert h is not c and h.device.type == "cpu"
assert not h.is_pinned()
h[0] = 42
assert g[0].item() == 0.0
g[1] = 7
assert h[1].item() == 1.0
print("ok")
