"""pin_memory() returns a pinned copy of a CPU tensor of any size; CUDA tensors can't be pinned.

GPU: t.pin_memory().is_pinned() is True (the original stays unpinned), values are equal,
and pinning a CUDA tensor raises "cannot pin 'torch.cuda.FloatTensor' only dense CPU
tensors can be pinned".
Source: aten/src/ATen/native/Memory.cpp (pin_memory, _pin_memory); torch docs "pin_memory".
"""

import torch

t = torch.arange(12.0).reshape(3, 4)
p = t.pin_memory()
assert p.is_pinned() and not t.is_pinned()
assert torch.equal(p, t) and p.data_ptr() != t.data_ptr()
assert p.pin_memory() is p  # already pinned: itself
q = p.to("cuda", non_blocking=True)
assert q.is_cuda
torch.ones(2, device="cuda").pin_memory()

EXPECT = {
    "exit": 1,
    "error": {
        "type": "RuntimeError",
        "message": r"cannot pin 'torch\.cuda\.FloatTensor' only dense CPU tensors can be pinned",
        "line": 18,
    },
}
