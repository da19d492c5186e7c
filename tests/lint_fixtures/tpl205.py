import torch
from torch.utils.data import DataLoader


def train(ds):
    loader = DataLoader(ds, batch_size=32)
    for x, y in loader:
        x = x.to("cuda", non_blocking=True)  # expect: TPL205
        y = y.cuda(non_blocking=True)  # expect: TPL205


def pinned(ds):
    loader = DataLoader(ds, batch_size=32, pin_memory=True)
    for x, y in loader:
        x = x.to("cuda", non_blocking=True)  # near miss: pinned


def from_caller(loader):
    for x, y in loader:
        x = x.to("cuda", non_blocking=True)  # near miss: the caller's loader may pin


def enumerated(ds):
    loader = torch.utils.data.DataLoader(ds)
    for i, batch in enumerate(loader):
        inputs = batch["x"].to("cuda", non_blocking=True)  # expect: TPL205
        blocking = batch["y"].to("cuda")  # near miss: not non_blocking
