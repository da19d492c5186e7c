"""pin_memory() gives a pinned CPU tensor; non_blocking copies from it are correct after
synchronize.
"""

import torch

# torch/_tensor_docs.py pin_memory / is_pinned; Tensor.to(non_blocking=True): "tries to
# convert asynchronously with respect to the host if possible, e.g., converting a CPU Tensor
# with pinned memory to a CUDA Tensor".
a = torch.arange(10_000, dtype=torch.float32)
assert not a.is_pinned()
p = a.pin_memory()
assert p.is_pinned() and p.device.type == "cpu"
g = p.to("cuda", non_blocking=True)
back = torch.empty_like(p).pin_memory()
back.copy_(g * 2, non_blocking=True)
torch.cuda.synchronize()
assert torch.equal(back, a * 2)
print("ok")
