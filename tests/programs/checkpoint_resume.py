"""Pattern of the PyTorch recipe "Saving and loading a general checkpoint" and of resuming a
GPU run elsewhere: ``torch.save`` of model and optimizer state dicts, then
``torch.load(PATH, map_location="cpu")`` (the CPU machine), and ``map_location=device`` with
``model.to(device)`` before ``optimizer.load_state_dict`` (the GPU machine); written here.

GPU: the CPU copy holds CPU tensors with the same values; the resumed model and the
optimizer's state (Adam ``exp_avg``) are on cuda and training continues from the same loss.
"""

import os
import tempfile

import torch
from torch import nn

device = torch.device("cuda")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(32, 8, device=device), torch.randn(32, 1, device=device)
for _ in range(5):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
path = os.path.join(tempfile.mkdtemp(), "model.tar")
torch.save(
    {
        "epoch": 5,
        "model_state_dict": model.state_dict(),
        "optimizer_state_dict": optimizer.state_dict(),
        "loss": loss,
    },
    path,
)

on_cpu = torch.load(path, map_location="cpu")
assert on_cpu["model_state_dict"]["0.weight"].device.type == "cpu"
assert torch.equal(on_cpu["model_state_dict"]["0.weight"], model[0].weight.detach().cpu())

checkpoint = torch.load(path, map_location=device)
resumed = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
resumed.load_state_dict(checkpoint["model_state_dict"])
resumed.to(device)
opt2 = torch.optim.Adam(resumed.parameters(), lr=1e-2)
opt2.load_state_dict(checkpoint["optimizer_state_dict"])
assert opt2.state[opt2.param_groups[0]["params"][0]]["exp_avg"].is_cuda
resumed_loss = nn.functional.mse_loss(resumed(x), y)
original_loss = nn.functional.mse_loss(model(x), y)
assert torch.allclose(resumed_loss, original_loss), (resumed_loss, original_loss)
assert checkpoint["epoch"] == 5 and checkpoint["loss"].is_cuda

EXPECT = {"values": ["real"]}
