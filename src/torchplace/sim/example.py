"""The built-in example for ``torchplace sim``: a training loop the way tutorials write it.

Run it on simulated GPUs with ``torchplace sim`` (no script), or for real with
``python -m torchplace.sim.example``. ``--forget-labels`` leaves the labels on the CPU,
the classic mistake, to show how the simulator reports a device error.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class SmallCNN(nn.Module):
    """A CIFAR-sized convolutional classifier (about 0.6 M parameters)."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1),
            nn.BatchNorm2d(128),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(128 * 4 * 4, 256), nn.ReLU(), nn.Linear(256, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--forget-labels", action="store_true")
    args = parser.parse_args(argv)

    # The tutorial way: pick the device, move the model, move every batch.
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(
        f"Using {device}" + (f" ({torch.cuda.get_device_name(0)})" if device.type == "cuda" else "")
    )

    torch.manual_seed(0)
    images = torch.randn(args.batch_size * args.steps, 3, 32, 32)
    labels = torch.randint(0, 10, (args.batch_size * args.steps,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=args.batch_size, shuffle=True)

    model = SmallCNN().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    running_loss = 0.0
    for step, (inputs, targets) in enumerate(loader, 1):
        inputs = inputs.to(device)
        if not args.forget_labels:
            targets = targets.to(device)
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()  # a device-to-host sync every step
        if step % 4 == 0:
            print(f"step {step}: loss {running_loss / 4:.3f}")
            running_loss = 0.0
    if device.type == "cuda":
        print(f"peak memory: {torch.cuda.max_memory_allocated() / 1024**2:.1f} MiB allocated")


if __name__ == "__main__":
    main()
