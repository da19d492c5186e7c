"""pin_memory() of a pinned tensor returns it; *_like of a pinned tensor is not pinned; pinned
views.
"""

import torch

# aten/src/ATen/native/Memory.cpp pin_memory: "if (self.is_pinned(device)) { return self; }";
# _torch_docs.py empty_like: pin_memory defaults to False; a view shares its base's (pinned)
# storage.
c = torch.arange(8.0)
assert not c.is_pinned()
p = c.pin_memory()
assert p is not c and p.is_pinned() and torch.equal(p, c)
assert p.pin_memory() is p
assert not torch.empty_like(p).is_pinned()
assert p[2:5].is_pinned()
e = torch.empty(4, pin_memory=True)
assert e.is_pinned() and e.device.type == "cpu"
assert not torch.ones(2, device="cuda").is_pinned()
print("ok")
