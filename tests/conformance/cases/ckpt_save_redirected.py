"""A simulated run never replaces a real checkpoint: torch.save of simulated tensors goes to
a scratch folder, and torch.load of the same path in the run reads it back.

GPU: torch.save(model.state_dict(), "ckpt.pt") writes ckpt.pt with storages tagged cuda:0.
Simulated: the real ckpt.pt (here a file saved earlier, on the host) is left untouched; the
report lists where the file went; loading "ckpt.pt" later in the run returns what was saved.
Source: torch/serialization.py (location tags); this project's rule that a simulation
never overwrites user data (issue 8, "A simulated run never destroys data").
"""

import os
import tempfile

import torch

folder = tempfile.mkdtemp()
path = os.path.join(folder, "ckpt.pt")
torch.save({"real": torch.ones(2)}, path)  # a host checkpoint: written in place
with open(path, "rb") as f:
    before = f.read()
model = torch.nn.Linear(3, 3).cuda()
torch.save(model.state_dict(), path)  # simulated tensors: redirected
with open(path, "rb") as f:
    assert f.read() == before  # the real file is untouched
back = torch.load(path)  # in this run, the path reads back what was saved
assert back["weight"].device == torch.device("cuda", 0) and back["weight"].shape == (3, 3)

EXPECT = {"sim_only": True}
