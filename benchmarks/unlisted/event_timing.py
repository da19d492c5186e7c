"""Timing events: record, synchronize, query() True, elapsed_time a non-negative float in ms."""

import torch

# torch/cuda/streams.py Event: record() on the current stream, synchronize(), query(),
# elapsed_time(end) "Return the time elapsed in milliseconds" (cudaEventElapsedTime).
a = torch.cuda.Event(enable_timing=True)
b = torch.cuda.Event(enable_timing=True)
x = torch.randn(256, 256, device="cuda")
a.record()
for _ in range(3):
    x = x @ x.T / 256
b.record()
b.synchronize()
assert a.query() and b.query()
ms = a.elapsed_time(b)
assert isinstance(ms, float) and ms >= 0.0, ms
print("ok", ms)
