# near miss: a file that only evaluates; PyTorch's advice against DataParallel is about training
import torch
import torch.nn as nn


def evaluate(model, loader, gpus):
    if gpus > 1:
        model = nn.DataParallel(model, device_ids=list(range(gpus)))
    model.eval()
    with torch.no_grad():
        return [model(x) for x in loader]
