"""Module.cuda().half(): parameters on cuda in float16, memory halves; buffers follow."""

import torch

# torch/nn/modules/module.py half(): "Casts all floating point parameters and buffers to half";
# _apply replaces param.data, the old storage is freed.
m = torch.nn.Sequential(torch.nn.Linear(1024, 1024, bias=False), torch.nn.BatchNorm1d(1024)).cuda()
full = torch.cuda.memory_allocated()
m.half()
assert all(p.dtype == torch.float16 and p.is_cuda for p in m.parameters())
assert m[1].running_mean.dtype == torch.float16
assert m[1].num_batches_tracked.dtype == torch.int64  # not floating: unchanged
assert torch.cuda.memory_allocated() < full * 0.6, (torch.cuda.memory_allocated(), full)
print("ok")
