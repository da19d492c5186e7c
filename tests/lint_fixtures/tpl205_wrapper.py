import torch
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def main(dataset, metric_logger):
    loader = DataLoader(dataset, batch_size=64, num_workers=4)
    for step, (x, y) in enumerate(metric_logger.log_every(loader, 10, "train")):
        x = x.to(device, non_blocking=True)  # expect: TPL205
        y = y.to(device)  # near miss: blocking
    pinned = DataLoader(dataset, batch_size=64, pin_memory=True)
    for x, _ in zip(pinned, range(10)):
        x = x.to(device, non_blocking=True)  # near miss: pinned
