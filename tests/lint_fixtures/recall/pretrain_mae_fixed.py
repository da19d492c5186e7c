"""Masked-autoencoder pre-training, one epoch per call (the shape of MAE/DINO engines)."""
import math
import sys
import time

import torch
from torch.utils.data import DataLoader

from util import misc
from util.lr_sched import adjust_learning_rate


def train_one_epoch(model, dataset, optimizer, loss_scaler, device, epoch, args):
    model.train(True)
    metric_logger = misc.MetricLogger(delimiter="  ")
    loader = DataLoader(
        dataset, batch_size=args.batch_size, num_workers=args.num_workers, pin_memory=True
    )
    accum_iter = args.accum_iter
    optimizer.zero_grad()
    for step, (samples, _) in enumerate(metric_logger.log_every(loader, 20, f"Epoch [{epoch}]")):
        if step % accum_iter == 0:
            adjust_learning_rate(optimizer, step / len(loader) + epoch, args)
        samples = samples.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss, _, _ = model(samples, mask_ratio=args.mask_ratio)
        loss /= accum_iter
        loss_scaler(loss, optimizer, parameters=model.parameters(),
                    update_grad=(step + 1) % accum_iter == 0)
        if (step + 1) % accum_iter == 0:
            optimizer.zero_grad()
        if step % 100 == 0:
            loss_value = loss.item() * accum_iter
            if not math.isfinite(loss_value):
                print(f"Loss is {loss_value}, stopping training")
                sys.exit(1)
            metric_logger.update(loss=loss_value)
    return {k: meter.global_avg for k, meter in metric_logger.meters.items()}


def resume(model, optimizer, path, device="cpu"):
    kwargs = {"map_location": device, "weights_only": True}
    checkpoint = torch.load(path, **kwargs)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["epoch"] + 1


def benchmark_forward(model, device, batch_size=64):
    images = torch.randn(batch_size, 3, 224, 224, device=device)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        model(images, mask_ratio=0.75)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    return elapsed / 20
