"""An ImageNet-style trainer written for torch 1.x and kept running."""
import os
import time

import torch
import torch.nn as nn
from torch.cuda.amp import GradScaler, autocast


def train(model, loader, criterion, optimizer, args):
    device = torch.device(f"cuda:{args.gpu}" if torch.cuda.is_available() else "cpu")
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)  # planted: TPL401
    model.to(device)
    scaler = GradScaler()  # planted: TPL402
    meter_loss, meter_acc = 0.0, 0.0
    end = time.time()
    for i, (images, target) in enumerate(loader):
        images, target = images.to(device), target.to(device)
        with autocast():  # planted: TPL402
            output = model(images)
            loss = criterion(output, target)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        meter_loss += loss.item()  # planted: TPL101
        meter_acc += (output.argmax(1) == target).float().mean().item()  # planted: TPL101
        if i % args.print_freq == 0:
            print(f"[{i}/{len(loader)}] loss {meter_loss / (i + 1):.4f} "
                  f"time {time.time() - end:.3f}")
        end = time.time()
    return meter_loss / len(loader)


def resume(model, optimizer, args):
    if args.resume and os.path.isfile(args.resume):
        checkpoint = torch.load(args.resume)  # planted: TPL301 TPL302
        model.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        return checkpoint["epoch"]
    return 0
