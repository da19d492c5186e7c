"""DataLoader(pin_memory=True) pins every tensor inside dict / list / tuple batches."""

import torch
from torch.utils.data import DataLoader, Dataset

# torch/utils/data/_utils/pin_memory.py pin_memory: recurses into Mappings, tuples (and
# namedtuples) and Sequences and calls .pin_memory() on each tensor; default_collate turns
# Python ints into an int64 tensor, which is pinned as well; strings are left alone.


class DS(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return {"x": torch.full((2,), float(i)), "pair": (torch.tensor(i), i), "name": f"s{i}"}


batch = next(iter(DataLoader(DS(), batch_size=2, pin_memory=True)))
assert batch["x"].is_pinned() and batch["x"].shape == (2, 2)
assert batch["pair"][0].is_pinned()
assert isinstance(batch["pair"][1], torch.Tensor) and batch["pair"][1].is_pinned()
assert batch["name"] == ["s0", "s1"]
g = batch["x"].cuda(non_blocking=True)
torch.cuda.synchronize()
assert g.is_cuda and g.tolist() == [[0.0, 0.0], [1.0, 1.0]]
print("ok")
