"""Stream(priority=-1).priority is -1; a default-priority stream has 0; query() True when idle."""

import torch

# torch/cuda/streams.py Stream(device=None, priority=0): "lower numbers represent higher
# priorities"; Stream.priority reads cudaStreamGetPriority (c10/cuda/CUDAStream.h priority()).
# Stream.query(): "True if all kernels in this stream are completed".
hi = torch.cuda.Stream(priority=-1)
lo = torch.cuda.Stream()
assert hi.priority == -1, hi.priority
assert lo.priority == 0, lo.priority
hi.synchronize()
assert hi.query()
print("ok")
