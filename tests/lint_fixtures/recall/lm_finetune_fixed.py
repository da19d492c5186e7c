"""Language-model fine-tuning loop with gradient accumulation and periodic evaluation."""
import time

import torch
from torch.utils.data import DataLoader


def train_step(model, batch, optimizer, scaler):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss


def finetune(model, train_set, device, epochs=3, log_every=50):
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    scaler = torch.amp.GradScaler("cuda")
    loader = DataLoader(train_set, batch_size=8, shuffle=True, num_workers=2)
    running = torch.zeros((), device=device)
    for epoch in range(epochs):
        t0 = time.perf_counter()
        for step, batch in enumerate(loader):
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            loss = train_step(model, batch, optimizer, scaler)
            running += loss.detach()
            if step % log_every == 0:
                print(f"epoch {epoch} step {step} loss {running.item() / (step + 1):.4f}")
        print(f"epoch {epoch} took {time.perf_counter() - t0:.1f}s")
    return model


def evaluate(model, loader, device):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in loader:
            batch = {k: v.to(device) for k, v in batch.items()}
            total += model(**batch).loss.item()
            count += 1
    return total / max(count, 1)
