"""An OOM on cuda:1 names GPU 1 in its message."""
# gpus: 2

import torch

# CUDACachingAllocator.cpp malloc's message: ". GPU " << device << " has a total capacity of"
try:
    torch.empty(200 * 2**30, dtype=torch.uint8, device="cuda:1")
except torch.OutOfMemoryError as e:
    assert "GPU 1 has a total capacity of" in str(e), str(e)
else:
    raise SystemExit("no error")
assert torch.cuda.memory_stats(1)["num_ooms"] == 1
assert torch.cuda.memory_stats(0)["num_ooms"] == 0
print("ok")
