"""Ops on cuda:1 tensors run and allocate on cuda:1 while the current device stays 0."""
# gpus: 2

import torch

# The generated CUDA wrappers open a device guard on the operands' device and restore the
# previous device afterwards (torchgen dest/register_dispatch_key.py: const OptionalDeviceGuard
# device_guard(device_of(self))); results go on the operands' device; memory stats are per
# device (torch/cuda/memory.py memory_allocated(device)).
x = torch.ones(1024, device="cuda:1")
y = x * 2
z = torch.zeros_like(x)
s = x.sum()
assert y.device == torch.device("cuda:1") and z.device == torch.device("cuda:1")
assert s.device == torch.device("cuda:1") and s.item() == 1024.0
assert torch.cuda.current_device() == 0
assert torch.cuda.memory_allocated(1) == 3 * 4096 + 512, torch.cuda.memory_allocated(1)
assert torch.cuda.memory_allocated(0) == 0
n = torch.nn.Linear(4, 4).to("cuda:1")
out = n(torch.ones(2, 4, device="cuda:1"))
assert out.device == torch.device("cuda:1") and torch.cuda.current_device() == 0
print("ok")
