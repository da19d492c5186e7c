"""memory_snapshot() lists segments with device, address, total_size, segment_type and blocks."""

import torch

# torch/cuda/memory.py memory_snapshot -> torch.cuda.memory._snapshot()["segments"]; each
# segment is a dict (torch/cuda/memory.py _Segment TypedDict / CUDACachingAllocator snapshot).
x = torch.empty(3 * 2**20, dtype=torch.uint8, device="cuda")  # large pool: 20 MiB segment
segs = torch.cuda.memory_snapshot()
assert len(segs) == 1, len(segs)
s = segs[0]
assert s["device"] == 0
assert s["total_size"] == 20 * 2**20
assert s["segment_type"] == "large"
assert s["allocated_size"] == 3 * 2**20
assert any(b["state"] == "active_allocated" and b["size"] == 3 * 2**20 for b in s["blocks"])
assert s["address"] <= x.data_ptr() < s["address"] + s["total_size"]
print("ok")
