"""torch.cuda.nvtx ranges work (profiler annotations) in a script run without a profiler.

GPU (no Nsight tool attached, as in a plain run): range_push and range_pop return -2
(NVTX_NO_PUSH_POP_TRACKING: nothing counts the depth), range_start returns 0; the range()
context manager and mark() work. Under nsys the depths are counted instead. A real H200
(torch 2.11) failed this case's first version, which expected depths 0 and 1.
Source: torch/cuda/nvtx.py (torch._C._nvtx); NVIDIA NVTX v3 nvToolsExt.h /
nvtxImpl (push/pop return NVTX_NO_PUSH_POP_TRACKING, defined as -2, when no tool's
callback is installed; nvtxRangeStartA returns 0).
"""

import torch

assert torch.cuda.nvtx.range_push("outer") == -2
assert torch.cuda.nvtx.range_push("inner") == -2
assert torch.cuda.nvtx.range_pop() == -2
assert torch.cuda.nvtx.range_pop() == -2
with torch.cuda.nvtx.range("step"):
    torch.ones(2, device="cuda").sum()
torch.cuda.nvtx.mark("done")
rid = torch.cuda.nvtx.range_start("r")
assert rid == 0
torch.cuda.nvtx.range_end(rid)

EXPECT = {}
