"""can_device_access_peer with a peer past the count raises AssertionError('Invalid peer device
id').
"""

import torch

# torch/cuda/__init__.py can_device_access_peer:
# if peer_device < 0 or peer_device >= device_count(): raise AssertionError("Invalid peer device
#   id")
try:
    torch.cuda.can_device_access_peer(0, 3)
except AssertionError as e:
    assert str(e) == "Invalid peer device id", str(e)
else:
    raise SystemExit("no error")
print("ok")
