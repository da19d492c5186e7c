"""Pattern of karpathy/nanoGPT bench.py (the plain timing loop, no profiler); written here.

A fixed batch on the GPU (``real_data=False``), bf16/fp16 autocast, a burn-in stage then a
benchmark stage, each bracketed by ``torch.cuda.synchronize()`` and timed with
``torch.cuda.Event(enable_timing=True)``; the loss is read with ``.item()`` every step as
bench.py prints it; model FLOPs utilisation is estimated from the GPU's peak.
GPU: the timed iterations take a positive time, the losses are finite, the MFU is in (0, 1].
"""

import math

import torch
from _nanogpt_model import GPT, GPTConfig

batch_size, block_size = 4, 128
device = "cuda"
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
torch.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = True
ptdtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = torch.amp.autocast(device_type="cuda", dtype=ptdtype)

cfg = GPTConfig(block_size=block_size, vocab_size=512, n_layer=2, n_head=4, n_embd=128)
model = GPT(cfg).to(device)
optimizer = model.configure_optimizers(1e-2, 1e-4, (0.9, 0.95), "cuda")
x = torch.randint(cfg.vocab_size, (batch_size, block_size), device=device)
y = torch.randint(cfg.vocab_size, (batch_size, block_size), device=device)

results = {}
for stage, num_steps in enumerate([3, 5]):  # burn-in, then benchmark
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    losses = []
    for _ in range(num_steps):
        with ctx:
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    end.record()
    torch.cuda.synchronize()
    results[stage] = start.elapsed_time(end) / num_steps  # ms per iteration

# 6N + 12 L T C flops per token (the PaLM appendix estimate bench.py uses)
n = model.num_params()
flops_per_iter = (6 * n + 12 * cfg.n_layer * block_size * cfg.n_embd) * batch_size * block_size
peak = 312e12  # bench.py assumes an A100's bf16 peak
mfu = flops_per_iter / (results[1] / 1e3) / peak
print(f"time per iteration: {results[1]:.4f} ms, MFU: {mfu * 100:.2f}%")
assert results[1] > 0 and all(math.isfinite(v) for v in losses)
assert 0 < mfu <= 1

EXPECT = {
    "heavy": True,
    "values": ["real"],
    "syncs": [{"kind": "item", "line": "losses.append(loss.item())", "count": 8}],
}
