"""Scripts that time themselves: CUDA events measure GPU time between two records.

GPU: Event(enable_timing=True).elapsed_time(end) returns the milliseconds the GPU spent
between the two records (here, a large matmul: well above zero). Under simulation it is
the cost model's estimate for the same work; time.time() around synchronised work is the
simulator's own CPU time, which the report's assumptions say.
Source: torch/cuda/streams.py Event.elapsed_time; nanoGPT bench.py times with
torch.cuda.synchronize() and time.time(), and with Events.
"""

import torch

a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
for _ in range(10):
    b = a @ a
end.record()
torch.cuda.synchronize()
ms = start.elapsed_time(end)
# 10 x 2*4096^3 bf16 FLOPs on an H100 (~989 TFLOP/s dense) is ~1.4 ms at the roofline
assert 1.0 < ms < 20.0, ms

EXPECT = {"gpu": "H100", "values": ["placeholder"]}
