"""torch.set_default_device("cuda") sends factories without device= to cuda:0, and back with
"cpu".
"""

import torch

# torch/__init__.py set_default_device / get_default_device: a device without an index is
# reported with the index a tensor made there gets (_get_device_with_index, torch.tensor([])),
# so get_default_device() is cuda:0; factories without device= use it (torch/utils/_device.py).
torch.set_default_device("cuda")
assert torch.get_default_device() == torch.device("cuda", 0), torch.get_default_device()
assert torch.zeros(2).device == torch.device("cuda:0")
assert torch.arange(3).is_cuda
assert torch.tensor([1.0]).device.type == "cuda"
lin = torch.nn.Linear(2, 3)
assert lin.weight.device == torch.device("cuda:0")
torch.set_default_device("cpu")
assert torch.zeros(2).device == torch.device("cpu")
assert torch.get_default_device() == torch.device("cpu")
print("ok")
