"""memory_summary() is a str table headed 'PyTorch CUDA memory summary, device ID 0'."""

import torch

# torch/cuda/memory.py memory_summary: lines.append(" {_PyTorch CUDA memory summary, device
# ID {device:<17d}} ") and rows "Allocated memory", "Active memory", "GPU reserved memory".
torch.empty(1000, device="cuda")
s = torch.cuda.memory_summary()
assert isinstance(s, str)
assert "PyTorch CUDA memory summary, device ID 0" in s
for row in ("Allocated memory", "Active memory", "GPU reserved memory", "Non-releasable memory"):
    assert row in s, row
print("ok")
