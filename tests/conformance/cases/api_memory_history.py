"""torch.cuda.memory._record_memory_history / _snapshot / _dump_snapshot, and the viewer.

GPU: after _record_memory_history(), allocations and frees are recorded as device-trace
entries (segment_alloc, alloc, free_requested, free_completed) with frames; _snapshot()
returns {"segments", "device_traces", ...}; _dump_snapshot writes it as a pickle that
torch.cuda._memory_viz renders (trace_plot, segment_plot).
Source: torch/cuda/memory.py (_record_memory_history, _snapshot, _dump_snapshot);
torch/cuda/_memory_viz.py; PyTorch docs "Understanding CUDA Memory Usage".
"""

import os
import pickle
import tempfile

import torch
from torch.cuda import _memory_viz

torch.cuda.memory._record_memory_history(max_entries=100000)
a = torch.empty(1024, 1024, device="cuda")  # 4 MiB: a 20 MiB segment
b = torch.empty(10, device="cuda")
del b
snap = torch.cuda.memory._snapshot()
torch.cuda.memory._record_memory_history(enabled=None)
actions = [e["action"] for e in snap["device_traces"][0]]
assert actions[:2] == ["segment_alloc", "alloc"], actions
assert "free_requested" in actions and "free_completed" in actions
alloc = next(e for e in snap["device_traces"][0] if e["action"] == "alloc")
assert alloc["size"] == 4 * 1024**2 and alloc["frames"], alloc
assert any(f["filename"].endswith("api_memory_history.py") for f in alloc["frames"])
path = os.path.join(tempfile.mkdtemp(), "snap.pickle")
torch.cuda.memory._dump_snapshot(path)
with open(path, "rb") as f:
    dumped = pickle.load(f)
assert "<html" in _memory_viz.trace_plot(dumped).lower()
assert "<html" in _memory_viz.segment_plot(dumped).lower()

EXPECT = {}
