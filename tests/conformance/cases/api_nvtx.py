"""torch.cuda.nvtx ranges work (profiler annotations), returning NVTX's depths.

GPU: range_push returns the zero-based depth of the range started, range_pop the depth of
the range ended; the range() context manager and mark() work.
Source: torch/cuda/nvtx.py; NVIDIA NVTX API (nvtxRangePushA / nvtxRangePop return values).
"""

import torch

assert torch.cuda.nvtx.range_push("outer") == 0
assert torch.cuda.nvtx.range_push("inner") == 1
assert torch.cuda.nvtx.range_pop() == 1
assert torch.cuda.nvtx.range_pop() == 0
with torch.cuda.nvtx.range("step"):
    torch.ones(2, device="cuda").sum()
torch.cuda.nvtx.mark("done")
rid = torch.cuda.nvtx.range_start("r")
torch.cuda.nvtx.range_end(rid)

EXPECT = {}
