import torch

model = torch.nn.Linear(4, 1).to("cuda")
data = [torch.randn(8, 4, device="cuda")]


def train():
    best = 1e9
    for step, x in enumerate(data):
        loss = model(x).sum()
        loss.backward()
        if torch.isnan(loss):  # expect: TPL103
            break
        if loss < best:  # expect: TPL103
            best = 0
        assert torch.isfinite(loss).all()  # expect: TPL103
        if step % 10 == 0 and loss > 5:  # near miss: only every 10 steps
            print("high")
        if x is None:  # near miss: an identity test, no tensor value
            continue
    return best


def outside():
    loss = model(data[0]).sum()
    loss.backward()
    if torch.isnan(loss):  # near miss: not in a loop
        raise ValueError("nan")
