"""map_location={'cuda:1': 'cuda:0'} moves a cuda:1 checkpoint to cuda:0;
map_location=torch.device('cuda:1') to cuda:1.
"""
# gpus: 2

import os
import tempfile

import torch

# torch/serialization.py load: "map_location: a function, torch.device, string or a dict
# specifying how to remap storage locations".
path = os.path.join(tempfile.mkdtemp(), "t.pt")
torch.save(torch.ones(3, device="cuda:1"), path)
assert torch.load(path).device == torch.device("cuda:1")
assert torch.load(path, map_location={"cuda:1": "cuda:0"}).device == torch.device("cuda:0")
torch.save(torch.ones(3, device="cuda:0"), path)
assert torch.load(path, map_location=torch.device("cuda:1")).device == torch.device("cuda:1")
print("ok")
