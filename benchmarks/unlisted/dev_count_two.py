"""Two H100s: device_count() 2, each with its own properties and name."""
# gpus: 2

import torch

# torch/cuda/__init__.py device_count / get_device_properties(i), one per ordinal.
assert torch.cuda.device_count() == 2
names = [torch.cuda.get_device_name(i) for i in range(2)]
assert all("H100" in n for n in names), names
assert torch.cuda.get_device_properties(1).major == 9
# can_device_access_peer: H100 SXM GPUs in one node are NVLink peers (cudaDeviceCanAccessPeer).
assert torch.cuda.can_device_access_peer(0, 1) is True
print("ok")
