"""DataLoader(pin_memory=True) yields pinned CPU batches, which move to cuda non_blocking."""

import torch
from torch.utils.data import DataLoader, TensorDataset

# torch/utils/data/dataloader.py _SingleProcessDataLoaderIter: if self._pin_memory:
# data = _utils.pin_memory.pin_memory(data, self._pin_memory_device) (when CUDA is available).
ds = TensorDataset(torch.arange(40.0).view(20, 2), torch.arange(20))
dl = DataLoader(ds, batch_size=8, pin_memory=True)
n = 0
for x, y in dl:
    assert x.is_pinned() and y.is_pinned(), (x.is_pinned(), y.is_pinned())
    assert x.device.type == "cpu"
    n += x.to("cuda", non_blocking=True).shape[0]
torch.cuda.synchronize()
assert n == 20
print("ok")
