"""CUDA tensors made or moved in threads the script starts are on the GPU too.

GPU: a prefetch thread that copies batches to the GPU (a common loader pattern) and a
ThreadPoolExecutor worker produce cuda:0 tensors; the main thread consumes them.
Source: CUDA's runtime is usable from any host thread (CUDA Runtime API, "Thread safety");
PyTorch tensors can be created and moved in Python threads (torch.cuda semantics notes).
"""

import queue
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

batches: queue.Queue[torch.Tensor] = queue.Queue()


def prefetch() -> None:
    for i in range(3):
        batches.put(torch.full((4, 4), float(i)).pin_memory().to("cuda", non_blocking=True))


t = threading.Thread(target=prefetch)
t.start()
t.join()
got = [batches.get() for _ in range(3)]
assert all(b.is_cuda for b in got)
with ThreadPoolExecutor(2) as pool:
    outs = list(pool.map(lambda n: torch.ones(n, device="cuda") * n, [1, 2, 3]))
assert [o.device.type for o in outs] == ["cuda"] * 3 and outs[2].sum().item() == 9.0

EXPECT = {"values": ["real"], "transfers": {"h2d": {"count": 3, "bytes": 192}}}
