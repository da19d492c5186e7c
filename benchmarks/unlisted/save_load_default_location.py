"""torch.load of a saved CUDA tensor returns it on cuda:0; map_location='cpu' returns it on the
CPU.
"""

import os
import tempfile

import torch

# torch/serialization.py: storages are restored to the location they were saved from
# (default_restore_location -> _cuda_deserialize) unless map_location says otherwise.
path = os.path.join(tempfile.mkdtemp(), "t.pt")
x = torch.arange(6.0, device="cuda").view(2, 3)
torch.save({"x": x, "step": 3}, path)
a = torch.load(path)
assert a["x"].device == torch.device("cuda:0") and torch.equal(a["x"], x)
b = torch.load(path, map_location="cpu")
assert b["x"].device.type == "cpu" and b["x"].tolist() == [[0, 1, 2], [3, 4, 5]]
assert b["step"] == 3
print("ok")
