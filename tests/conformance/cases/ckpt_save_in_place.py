"""torch.save of GPU tensors writes where the script says; a later save replaces the file.

GPU: torch.save(model.state_dict(), "ckpt.pt") writes ckpt.pt with storages tagged cuda:0;
saving again (each epoch) replaces it; torch.load with map_location="cpu" reads it on the
host, and a second script of the same workflow finds it where the first put it.
Simulated with real values: the same (docs/sim.md, "Files the script saves": a file goes
where the script says unless it would replace one the run did not make, which this run
did). With placeholder values the file would hold no data, so it goes to a scratch
folder instead: that mode is tested in tests/test_cli_sim.py.
Source: torch/serialization.py (location tags, map_location).
"""

import os
import tempfile

import torch

folder = tempfile.mkdtemp()
path = os.path.join(folder, "ckpt.pt")
torch.save({"real": torch.ones(2)}, path)  # a host checkpoint, written by this run
model = torch.nn.Linear(3, 3).cuda()
for epoch in range(2):
    with torch.no_grad():
        model.weight.fill_(epoch)
    torch.save({"model": model.state_dict(), "epoch": epoch}, path)  # replaces it
back = torch.load(path, map_location="cpu")  # as a sampling script would read it
assert back["epoch"] == 1 and back["model"]["weight"].device == torch.device("cpu")
assert torch.equal(back["model"]["weight"], torch.ones(3, 3))
assert torch.load(path)["model"]["weight"].device == torch.device("cuda", 0)
assert os.listdir(folder) == ["ckpt.pt"]

EXPECT = {"values": ["real"]}
