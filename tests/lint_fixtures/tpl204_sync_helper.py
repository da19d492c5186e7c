import torch


def _synchronize():
    torch.cuda.synchronize()


def gather(t):
    out = t.to("cpu", non_blocking=True)  # near miss: a helper synchronises before the read
    _synchronize()
    return out.numpy()


def splits(counts, other):
    first = counts.sum(dim=1).to("cpu", non_blocking=True)  # near miss: a blocking copy follows
    second = other.sum(dim=1).to("cpu")
    return first.tolist(), second.tolist()


def racy(t):
    out = t.to("cpu", non_blocking=True)  # expect: TPL204
    total = out.sum()
    torch.cuda.synchronize()
    return total
