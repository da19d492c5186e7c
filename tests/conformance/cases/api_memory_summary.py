"""torch.cuda.memory_summary(), memory_stats() and memory_snapshot() describe the allocator.

GPU: memory_summary() is PyTorch's table ("PyTorch CUDA memory summary, device ID 0");
memory_stats() has "allocated_bytes.all.current" equal to memory_allocated();
memory_snapshot() lists segments whose blocks include the live tensor's 512-byte-rounded
block.
Source: torch/cuda/memory.py (memory_summary formats memory_stats; memory_snapshot returns
torch._C._cuda_memorySnapshot()["segments"]); c10/cuda/CUDACachingAllocator.cpp.
"""

import torch

x = torch.empty(1000, device="cuda")  # 4000 B -> one 4096-byte block in a 2 MiB segment
stats = torch.cuda.memory_stats()
assert stats["allocated_bytes.all.current"] == torch.cuda.memory_allocated() == 4096
assert stats["reserved_bytes.all.current"] == torch.cuda.memory_reserved() == 2 * 1024**2
summary = torch.cuda.memory_summary()
assert "PyTorch CUDA memory summary, device ID 0" in summary, summary[:200]
segments = torch.cuda.memory_snapshot()
blocks = [b for seg in segments for b in seg["blocks"] if b["state"] == "active_allocated"]
assert [b["size"] for b in blocks] == [4096], blocks
assert segments[0]["total_size"] == 2 * 1024**2
assert torch.cuda.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["current"] == 4096
torch.cuda.reset_peak_memory_stats()
assert torch.cuda.max_memory_allocated() == 4096

EXPECT = {}
