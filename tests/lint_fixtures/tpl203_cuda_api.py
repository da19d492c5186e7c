# near miss: the file calls CUDA-only APIs unconditionally: it is CUDA code by design
import time

import torch


def timed(fn, n):
    x = torch.empty(n, device="cuda")
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn(x)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end), time.time()
