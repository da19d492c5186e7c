"""memory_allocated accepts an int, "cuda:0", a torch.device or nothing; a CPU device is a
ValueError.
"""

import torch

# torch/cuda/memory.py memory_allocated(device=None) -> _get_device_index(device, optional=True)
# (torch/cuda/_utils.py): ints pass, strings and torch.device("cuda") resolve to the current
# device; another type raises ValueError(f"Expected a cuda device, but got: {device}").
x = torch.empty(1000, device="cuda")
n = torch.cuda.memory_allocated()
assert n == 4096
assert torch.cuda.memory_allocated(0) == n
assert torch.cuda.memory_allocated("cuda:0") == n
assert torch.cuda.memory_allocated("cuda") == n
assert torch.cuda.memory_allocated(torch.device("cuda", 0)) == n
assert torch.cuda.memory_reserved(torch.device("cuda")) == 2 * 1024**2
try:
    torch.cuda.memory_allocated("cpu")
except ValueError as e:
    assert str(e) == "Expected a cuda device, but got: cpu", str(e)
else:
    raise SystemExit("no error")
print("ok")
