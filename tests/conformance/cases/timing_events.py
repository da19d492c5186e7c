"""Scripts that time themselves: CUDA events measure GPU time between two records.

GPU: Event(enable_timing=True).elapsed_time(end) returns the milliseconds the GPU spent
between the two records (here, a large matmul: well above zero). Under simulation it is
the cost model's estimate for the same work; time.time() around synchronised work is the
simulator's own CPU time, which the report's assumptions say. The first matmul of a process
also creates the cuBLAS handle and loads its kernels (CUDA lazy loading): an H200 timed
75.8 ms for a loop that began with it, so the loop is timed after one warm-up matmul, as
benchmarks do.
Source: torch/cuda/streams.py Event.elapsed_time; nanoGPT bench.py times with
torch.cuda.synchronize() and time.time(), and with Events, after a burn-in; CUDA C
Programming Guide, "Lazy Loading" (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2).
"""

import torch

a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
a @ a  # warm-up: cuBLAS handle, workspace and kernel loading happen here, not in the timing
torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
for _ in range(10):
    b = a @ a
end.record()
torch.cuda.synchronize()
ms = start.elapsed_time(end)
# 10 x 2*4096^3 bf16 FLOPs on an H100 (~989 TFLOP/s dense) is ~1.4 ms at the roofline
assert 1.0 < ms < 20.0, ms

EXPECT = {
    "gpu": "H100",
    "values": ["placeholder"],
    "needs": {"gpu": ["H100", "H200"]},  # the same SMs and clocks: the same bound holds
}
