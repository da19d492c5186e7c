"""A module on cuda:1 called on a cuda:0 input raises the same-device RuntimeError naming both."""
# gpus: 2

import torch

# torchgen device check: "Expected all tensors to be on the same device, but found at least
# two devices, cuda:1 and cuda:0!" (order depends on the op's arguments).
m = torch.nn.Linear(4, 4).to("cuda:1")
try:
    m(torch.randn(2, 4, device="cuda:0"))
except RuntimeError as e:
    s = str(e)
    assert (
        "Expected all tensors to be on the same device" in s and "cuda:0" in s and "cuda:1" in s
    ), s
else:
    raise SystemExit("no error")
print("ok")
