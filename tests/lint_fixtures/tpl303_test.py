import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def test_losses_recorded(batches):
    losses = []
    for x in batches:
        loss = model(x).sum()
        loss.backward()
        opt.step()
        losses.append(loss)  # near miss: a test's few steps
    assert len(losses) == len(batches)
