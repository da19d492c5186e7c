"""A batch inference worker: loads a checkpoint, runs requests, returns host arrays."""
import io
import time

import numpy as np
import torch

from .model import TextClassifier

DEVICE = "cuda"


def load_model(path):
    model = TextClassifier()
    state = torch.load(path, weights_only=True)  # planted: TPL301
    model.load_state_dict(state["model"])
    return model.to(DEVICE).eval()  # planted: TPL203


@torch.inference_mode()
def predict(model, batch):
    logits = model(batch.to(DEVICE, non_blocking=True))  # planted: TPL203
    probs = logits.softmax(-1).to("cpu", non_blocking=True)  # planted: TPL204
    return probs.numpy()


@torch.inference_mode()
def timed_predict(model, batch):
    start = time.time()
    logits = model(batch.cuda())  # planted: TPL203
    latency = time.time() - start  # planted: TPL105
    return logits.argmax(-1).cpu().numpy(), latency


def warmup(model, shape):
    for _ in range(3):
        dummy = torch.zeros(shape, dtype=torch.long).cuda()  # planted: TPL206 TPL203
        model(dummy)


def export(model):
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)
