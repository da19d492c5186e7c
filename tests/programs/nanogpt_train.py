"""Pattern of karpathy/nanoGPT train.py (single GPU, --compile=False); written for this corpus.

Configuration as module globals overridden by ``--key=value`` arguments (nanoGPT's
configurator); token data in a uint16 ``np.memmap`` read by random offsets, batches pinned and
copied with ``non_blocking=True``; autocast in bfloat16 where the GPU supports it, else float16
with a GradScaler; gradient accumulation, gradient clipping after ``scaler.unscale_``, a cosine
learning-rate schedule with warm-up, ``estimate_loss()`` every ``eval_interval`` iterations
and a checkpoint dict saved to ``out_dir``. The defaults are GPT-2 124M's, as in nanoGPT; the
corpus runs it with a small model. GPU: the loss falls and is finite; the checkpoint holds
cuda tensors.
"""

import math
import os
import sys
import tempfile
import time
from contextlib import nullcontext

import numpy as np
import torch
from _nanogpt_model import GPT, GPTConfig

out_dir = os.path.join(tempfile.gettempdir(), "nanogpt-out")
eval_interval, eval_iters, log_interval = 2000, 200, 1
gradient_accumulation_steps = 1
batch_size, block_size = 12, 1024
n_layer, n_head, n_embd, dropout, bias, vocab_size = 12, 12, 768, 0.0, False, 50304
learning_rate, max_iters, weight_decay, beta1, beta2, grad_clip = 6e-4, 600000, 1e-1, 0.9, 0.95, 1.0
warmup_iters, lr_decay_iters, min_lr = 2000, 600000, 6e-5
device = "cuda"
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
compile = False  # torch.compile is not what this corpus checks
for arg in sys.argv[1:]:  # the configurator: --key=value, with the default's type
    key, value = arg[2:].split("=", 1)
    assert key in globals(), f"unknown config key {key}"
    old = globals()[key]
    globals()[key] = value if isinstance(old, str) else type(old)(eval(value))

torch.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = (
    nullcontext()
    if device_type == "cpu"
    else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
)

# the dataset: a token file, as prepare.py writes it
data_path = os.path.join(tempfile.mkdtemp(), "train.bin")
rng = np.random.default_rng(0)
pattern = rng.integers(0, vocab_size, size=97, dtype=np.uint16)
np.tile(pattern, 2000).tofile(data_path)  # a repeating text: learnable
data = np.memmap(data_path, dtype=np.uint16, mode="r")


def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i : i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack(
        [torch.from_numpy(data[i + 1 : i + 1 + block_size].astype(np.int64)) for i in ix]
    )
    if device_type == "cuda":
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(
            device, non_blocking=True
        )
    return x.to(device), y.to(device)


cfg = GPTConfig(block_size, vocab_size, n_layer, n_head, n_embd, dropout, bias)
model = GPT(cfg).to(device)
print(f"number of parameters: {model.num_params() / 1e6:.2f}M")
scaler = torch.amp.GradScaler("cuda", enabled=(dtype == "float16"))
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)


@torch.no_grad()
def estimate_loss() -> float:
    model.eval()
    losses = torch.zeros(eval_iters)
    for k in range(eval_iters):
        x, y = get_batch()
        with ctx:
            _, loss = model(x, y)
        losses[k] = loss.item()
    model.train()
    return losses.mean().item()


def get_lr(it: int) -> float:
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


val_losses, train_losses = [], []
x, y = get_batch()
t0 = time.time()
for iter_num in range(max_iters + 1):
    for group in optimizer.param_groups:
        group["lr"] = get_lr(iter_num)
    if iter_num % eval_interval == 0:
        val_losses.append(estimate_loss())
        print(f"step {iter_num}: loss {val_losses[-1]:.4f}")
        if iter_num > 0:
            os.makedirs(out_dir, exist_ok=True)
            checkpoint = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "model_args": cfg.__dict__,
                "iter_num": iter_num,
                "best_val_loss": val_losses[-1],
            }
            torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
    if iter_num == max_iters:
        break
    for _ in range(gradient_accumulation_steps):
        with ctx:
            logits, loss = model(x, y)
            loss = loss / gradient_accumulation_steps
        x, y = get_batch()  # prefetch the next batch while the GPU works
        scaler.scale(loss).backward()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    if iter_num % log_interval == 0:
        train_losses.append(loss.item() * gradient_accumulation_steps)
        t1, t0 = time.time(), time.time()

assert all(math.isfinite(v) for v in val_losses + train_losses), (val_losses, train_losses)
assert val_losses[-1] < val_losses[0], val_losses
back = torch.load(os.path.join(out_dir, "ckpt.pt"))
assert back["model"]["head.weight"].is_cuda and back["iter_num"] == max_iters
assert torch.cuda.max_memory_allocated() > 0

EXPECT = {
    "heavy": True,
    "args": [
        "--batch_size=8",
        "--block_size=64",
        "--n_layer=2",
        "--n_head=4",
        "--n_embd=64",
        "--vocab_size=128",
        "--max_iters=20",
        "--eval_interval=10",
        "--eval_iters=2",
        "--warmup_iters=5",
        "--lr_decay_iters=20",
        "--learning_rate=3e-3",
        "--min_lr=3e-4",
    ],
    "values": ["real"],
}
