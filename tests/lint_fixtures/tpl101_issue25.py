# Shapes that torchplace lint missed on unseen code (issue 25), and their near misses.
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.AdamW(model.parameters())


def train_one_epoch(loader, loss_scaler, metric_logger):
    # backward() runs inside loss_scaler(loss, optimizer, ...): still a training loop
    for samples, targets in metric_logger.log_every(loader, 10):
        samples = samples.to(device, non_blocking=True)
        loss = (model(samples) - targets.to(device)).square().mean()
        loss_value = loss.item()  # expect: TPL101
        loss_scaler(loss, optimizer, parameters=model.parameters())
        metric_logger.update(loss=loss_value)


def log_every_hundred(loader):
    running = 0.0
    for step, (x, y) in enumerate(loader):
        loss = (model(x.to(device)) - y.to(device)).square().mean()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print(step, loss.item())  # near miss: every 100 steps
        else:
            running += loss.item()  # expect: TPL101
    return running


def adjust_each_epoch(loader, epochs, scheduler):
    for epoch in range(epochs):
        scheduler.step(optimizer, epoch)  # near miss: hands over the optimizer, no loss
        print(epoch, torch.zeros(1, device=device).item())  # near miss: not a training loop


def test_loss_goes_down(loader):
    losses = []
    for x, y in loader:
        loss = (model(x.to(device)) - y.to(device)).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())  # near miss: a test checks its few steps' values
    assert losses[-1] < losses[0]
