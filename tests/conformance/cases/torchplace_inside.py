"""torchplace's own API, inside a simulation, sees the simulated GPUs as it would real ones.

GPU (any one card): torchplace.devices() lists cuda:0 with the GPU's name and memory; device("auto") picks
it; torchplace.to() moves a batch (pinned tensors non-blocking); a Runner trains on it and
its tensors are accounted on the GPU.
Source: torchplace's documented behaviour on GPU machines (README "Devices", "Training on
any device"); issue 8, "torchplace inside torchplace".
"""

import torch
from torch.utils.data import DataLoader, TensorDataset

import torchplace

found = [d for d in torchplace.devices() if d.type == "cuda"]
assert len(found) == 1 and found[0].name == torch.cuda.get_device_name(0), found
assert torchplace.device() == torch.device("cuda", 0)
batch = torchplace.to({"x": torch.ones(4, 4).pin_memory(), "ids": ["a"]}, "cuda")
assert batch["x"].is_cuda and batch["ids"] == ["a"]
data = TensorDataset(torch.randn(256, 8), torch.randint(0, 3, (256,)))
with torchplace.Runner() as runner:
    assert runner.device == torch.device("cuda", 0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    model, opt = runner.setup(net, torch.optim.AdamW(net.parameters()))
    for x, y in runner.loader(DataLoader(data, batch_size=64)):
        with runner.autocast():
            loss = torch.nn.functional.cross_entropy(model(x), y)
        runner.backward(loss)
        runner.step(opt)
assert torch.cuda.max_memory_allocated() > 0

EXPECT = {}
