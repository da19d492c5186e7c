"""torch.load map_location as "cpu", torch.device, a callable, or "cuda:0" places a cuda checkpoint
there.
"""

import io

import torch

# torch/serialization.py load docstring: map_location may be a string, a torch.device, a dict
# or a function(storage, location) (e.g. "lambda storage, loc: storage" loads to the CPU);
# the location string a cuda tensor was saved with is "cuda:0".
x = torch.arange(4.0, device="cuda")
buf = io.BytesIO()
torch.save(x, buf)
data = buf.getvalue()


def load(ml):
    return torch.load(io.BytesIO(data), map_location=ml)


assert load("cpu").device.type == "cpu"
assert load(torch.device("cpu")).device.type == "cpu"
seen = []
y = load(lambda storage, loc: seen.append(loc) or storage)
assert y.device.type == "cpu" and seen == ["cuda:0"], seen
z = load(lambda storage, loc: storage.cuda(0))
assert z.device == torch.device("cuda:0")
assert load("cuda:0").device == torch.device("cuda:0")
c = io.BytesIO()
torch.save(torch.ones(2), c)
c.seek(0)
assert torch.load(c, map_location="cuda").device == torch.device("cuda:0")
print("ok")
