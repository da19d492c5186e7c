import numpy as np
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Linear(4, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [torch.randn(8, 4) for _ in range(10)]


def train():
    total = 0.0
    for step, x in enumerate(data):
        loss = model(x.to(device)).square().mean()
        loss.backward()
        opt.step()
        total += loss.item()  # expect: TPL101
        preds = model(x.to(device)).detach().cpu().numpy()  # expect: TPL101
        values = loss.tolist()  # expect: TPL101
        lossf = float(loss)  # expect: TPL101
        if step % 100 == 0:
            print(loss.item())  # near miss: every 100 steps
    print(total, loss.item(), preds, values, lossf)  # near miss: once, after the loop


def periodic():
    for step, x in enumerate(data):
        loss = model(x).sum()
        loss.backward()
        if step % 10 != 0:
            continue
        print(loss.item())  # near miss: after a conditional continue that follows backward


def skip_bad_batches():
    for x in data:
        if x is None:
            continue
        loss = model(x).sum()
        loss.backward()
        print(loss.item())  # expect: TPL101


def evaluate():
    correct = 0
    for x in data:
        correct += model(x).argmax().item()  # near miss: no backward, not a training loop
    return correct


def per_epoch():
    for epoch in range(3):
        for x in data:
            loss = model(x).sum()
            loss.backward()
        print(epoch, loss.item())  # near miss: once per epoch


def numpy_values():
    for x in data:
        loss = model(x).sum()
        loss.backward()
        n = np.float32(3).item()  # near miss: a NumPy scalar
        print(n)
