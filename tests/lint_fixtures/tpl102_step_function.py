# a training step in a function of the file: its loss is a tensor in the caller's loop
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.AdamW(model.parameters())


def train_step(x, y):
    loss = (model(x) - y).square().mean()
    loss.backward()
    optimizer.step()
    return loss


def train_with_a_step_function(loader):
    for x, y in loader:
        loss = train_step(x.to(device), y.to(device))
        print(f"loss {loss:.3f}")  # expect: TPL102


def evaluate(loader):
    for x, y in loader:
        loss = (model(x.to(device)) - y.to(device)).square().mean()
        print(f"eval loss {loss:.3f}")  # near miss: no training here
