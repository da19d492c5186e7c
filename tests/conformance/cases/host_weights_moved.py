"""Weights built on the host and then moved with .cuda() are noted with the fix.

GPU machine: building a model on the host then calling .cuda() costs host RAM for the whole
model and a host-to-device copy; `with torch.device("cuda"):` builds it on the GPU directly.
Under simulation the report notes it, with that fix, once the moved weights pass 1 GiB.
Source: PyTorch docs "torch.device as a context manager" and "meta device" (building
modules directly on a device); issue 8 §3.
"""

import torch

blocks = [torch.nn.Linear(4096, 4096) for _ in range(17)]  # 1.06 GiB of fp32 weights
for b in blocks:
    b.cuda()
with torch.device("cuda"):
    direct = torch.nn.Linear(4096, 4096)  # built on the device: nothing from the host

EXPECT = {
    "sim_only": True,
    "values": ["placeholder"],
    "notes": [
        r"builds its weights on the host and then moves them to the GPU.*with torch\.device\('cuda'\)"
    ],
    "transfers": {"h2d": {"count": 34}},
}
