"""memory_stats() has the documented keys and they agree with memory_allocated/reserved."""

import torch

# torch/cuda/memory.py memory_stats docstring: "allocated_bytes.{all,large_pool,small_pool}.
# {current,peak,allocated,freed}", "reserved_bytes...", "active_bytes...", "num_alloc_retries",
# "num_ooms", "num_device_alloc", "num_device_free", ...
x = torch.empty(300, device="cuda")
y = torch.empty(2**20, device="cuda")
s = torch.cuda.memory_stats()
for k in (
    "allocated_bytes.all.current",
    "allocated_bytes.small_pool.current",
    "allocated_bytes.large_pool.peak",
    "reserved_bytes.all.current",
    "active_bytes.all.current",
    "segment.all.current",
    "num_alloc_retries",
    "num_ooms",
    "num_device_alloc",
):
    assert k in s, k
assert s["allocated_bytes.all.current"] == torch.cuda.memory_allocated()
assert s["reserved_bytes.all.current"] == torch.cuda.memory_reserved()
assert s["allocated_bytes.small_pool.current"] == 1536  # 1200 B -> 1536
assert s["allocated_bytes.large_pool.current"] == 4 * 2**20
assert s["segment.all.current"] == 2
assert s["num_ooms"] == 0
print("ok")
