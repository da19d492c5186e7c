"""A small training script, the way tutorials write one: for trying torchplace on.

    python examples/train.py                      # on this machine's device
    torchplace sim examples/train.py              # on a simulated H100
    torchplace sim --gpu T4 examples/train.py --batch-size 512 --save /tmp/ckpt.pt

It trains a two-layer network on random data for a few steps, prints the loss, and with
``--save`` writes a checkpoint (``--resume`` reads it back first).
"""

import argparse
import os

import torch
from torch import nn

parser = argparse.ArgumentParser(description="Train a small model on random data.")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--steps", type=int, default=4, help="steps per epoch")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--width", type=int, default=1024, help="hidden units")
parser.add_argument("--save", metavar="PATH", help="write a checkpoint there after each epoch")
parser.add_argument("--resume", action="store_true", help="start from the --save checkpoint")
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, args.width), nn.ReLU(), nn.Linear(args.width, 10)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
first = 0
if args.resume and args.save and os.path.exists(args.save):
    state = torch.load(args.save, map_location=device, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    first = state["epoch"] + 1

for epoch in range(first, first + args.epochs):
    total = torch.zeros((), device=device)
    for _ in range(args.steps):
        x = torch.randn(args.batch_size, 256, device=device)
        y = torch.randint(0, 10, (args.batch_size,), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
    print(f"epoch {epoch}: loss {total.item() / args.steps:.3f} on {device}")
    if args.save:
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        torch.save({**state, "epoch": epoch}, args.save)
