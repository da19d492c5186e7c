import torch

model = torch.nn.Linear(4, 1)
data = [torch.randn(8, 4)]


def train():
    total = 0
    running = 0
    losses = []
    fine = 0
    for x in data:
        loss = model(x).sum()
        loss.backward()
        total += loss  # expect: TPL303
        losses.append(loss)  # expect: TPL303
        running = running + loss  # expect: TPL303
        fine += loss.detach()  # near miss: detached
    return total, running, losses, fine


def one_backward(parts):
    total = 0
    for p in parts:
        total += model(p).sum()  # near miss: summed for one backward after the loop
    total.backward()


def retained():
    acc = 0
    for x in data:
        loss = model(x).sum()
        loss.backward(retain_graph=True)
        acc += loss  # near miss: the graph is kept on purpose
    return acc


def as_number():
    total = 0.0
    for x in data:
        loss = model(x).sum()
        loss.backward()
        loss = loss.item()
        total += loss  # near miss: a float by now
    return total
