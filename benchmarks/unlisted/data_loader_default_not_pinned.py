"""DataLoader without pin_memory yields unpinned batches; default_collate keeps them on the CPU."""

from torch.utils.data import DataLoader

# torch/utils/data/dataloader.py: pin_memory defaults to False.
dl = DataLoader(list(range(10)), batch_size=5)
b = next(iter(dl))
assert not b.is_pinned() and b.device.type == "cpu"
assert b.cuda().sum().item() == 10
print("ok")
