"""A batch inference worker: loads a checkpoint, runs requests, returns host arrays."""
import io
import time

import numpy as np
import torch

from .model import TextClassifier

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def load_model(path):
    model = TextClassifier()
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    return model.to(DEVICE).eval()


@torch.inference_mode()
def predict(model, batch):
    logits = model(batch.to(DEVICE, non_blocking=True))
    probs = logits.softmax(-1).to("cpu")
    return probs.numpy()


@torch.inference_mode()
def timed_predict(model, batch):
    start = time.time()
    logits = model(batch.to(DEVICE))
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    latency = time.time() - start
    return logits.argmax(-1).cpu().numpy(), latency


def warmup(model, shape):
    for _ in range(3):
        dummy = torch.zeros(shape, dtype=torch.long, device=DEVICE)
        model(dummy)


def export(model):
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)
