"""An ImageNet-style trainer written for torch 1.x and kept running."""
import os
import time

import torch
from torch.amp import GradScaler, autocast


def train(model, loader, criterion, optimizer, args):
    device = torch.device(f"cuda:{args.gpu}" if torch.cuda.is_available() else "cpu")
    model.to(device)
    scaler = GradScaler(device.type)
    meter_loss = torch.zeros((), device=device)
    meter_acc = torch.zeros((), device=device)
    end = time.time()
    for i, (images, target) in enumerate(loader):
        images, target = images.to(device), target.to(device)
        with autocast(device.type):
            output = model(images)
            loss = criterion(output, target)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        meter_loss += loss.detach()
        meter_acc += (output.argmax(1) == target).float().mean()
        if i % args.print_freq == 0:
            print(f"[{i}/{len(loader)}] loss {meter_loss.item() / (i + 1):.4f} "
                  f"time {time.time() - end:.3f}")
        end = time.time()
    return meter_loss.item() / len(loader)


def resume(model, optimizer, args):
    if args.resume and os.path.isfile(args.resume):
        checkpoint = torch.load(args.resume, map_location="cpu", weights_only=True)
        model.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        return checkpoint["epoch"]
    return 0
