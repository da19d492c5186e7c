import logging

import torch

model = torch.nn.Linear(4, 1).to("cuda")
data = [torch.randn(8, 4, device="cuda")]


def train():
    for x in data:
        loss = model(x).sum()
        loss.backward()
        print(loss)  # expect: TPL102
        print(f"loss {loss:.4f}")  # expect: TPL102
        logging.info("loss %s" % loss)  # expect: TPL102
        print("step done")  # near miss: no tensor


def rebound():
    for x in data:
        loss = model(x).sum()
        loss.backward()
        loss = loss.item()
        print(loss)  # near miss: a float by now


def periodic():
    for step, x in enumerate(data):
        loss = model(x).sum()
        loss.backward()
        if step % 50 == 0:
            print(f"{loss}")  # near miss: every 50 steps
