"""Pattern of pytorch/examples mnist/main.py; written for this corpus (synthetic digits, as
this machine has no dataset download).

argparse options with ``--no-cuda``; ``device = torch.device("cuda" if use_cuda else "cpu")``;
DataLoader kwargs ``num_workers=1, pin_memory=True, shuffle=True`` on CUDA; a two-conv net with
dropout and log_softmax; Adadelta with StepLR; ``train()`` moves each batch with
``data.to(device), target.to(device)`` and logs ``loss.item()``; ``test()`` sums
``F.nll_loss(..., reduction="sum").item()`` and counts ``pred.eq(target.view_as(pred)).sum()``.
GPU: the test loss falls and accuracy rises above chance.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(16 * 6 * 6, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def digits(n: int, generator: torch.Generator) -> TensorDataset:
    """Ten class templates plus noise: 16x16 'digits' a small CNN can learn."""
    templates = torch.rand(10, 1, 16, 16, generator=torch.Generator().manual_seed(0)) > 0.5
    labels = torch.randint(0, 10, (n,), generator=generator)
    images = templates[labels].float() + 0.5 * torch.randn(n, 1, 16, 16, generator=generator)
    return TensorDataset((images - 0.5) / 0.5, labels)


def train(args, model, device, loader, optimizer, epoch) -> None:
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(
                f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(loader.dataset)}]\tLoss: {loss.item():.6f}"
            )


def test(model, device, loader) -> tuple[float, float]:
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    n = len(loader.dataset)
    print(f"Test set: Average loss: {test_loss / n:.4f}, Accuracy: {correct}/{n}")
    return test_loss / n, correct / n


parser = argparse.ArgumentParser(description="PyTorch MNIST Example")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=1.0)
parser.add_argument("--gamma", type=float, default=0.7)
parser.add_argument("--no-cuda", action="store_true")
parser.add_argument("--log-interval", type=int, default=10)
args = parser.parse_args()
use_cuda = not args.no_cuda and torch.cuda.is_available()
torch.manual_seed(1)
device = torch.device("cuda" if use_cuda else "cpu")
train_kwargs = {"batch_size": args.batch_size, "shuffle": True}
if use_cuda:
    train_kwargs.update({"num_workers": 1, "pin_memory": True})
g = torch.Generator().manual_seed(1)
train_loader = DataLoader(digits(640, g), **train_kwargs)
test_loader = DataLoader(digits(256, g), batch_size=256)

model = Net().to(device)
optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
first = test(model, device, test_loader)
for epoch in range(1, args.epochs + 1):
    train(args, model, device, train_loader, optimizer, epoch)
    last = test(model, device, test_loader)
    scheduler.step()

assert use_cuda and next(model.parameters()).is_cuda
assert last[0] < first[0] and last[1] > 0.5, (first, last)

EXPECT = {"heavy": True, "values": ["real"]}
