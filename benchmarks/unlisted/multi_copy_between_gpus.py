"""cuda:0 -> cuda:1 copies keep values; copy_ across devices works; memory lands on the target."""
# gpus: 2

import torch

# aten/src/ATen/native/cuda/Copy.cu copy_device_to_device (peer copy); memory is allocated on
# the destination device's allocator.
a = torch.arange(1000.0, device="cuda:0")
b = a.to("cuda:1")
assert b.device == torch.device("cuda:1") and torch.equal(b.cpu(), a.cpu())
c = torch.empty(1000, device="cuda:1")
c.copy_(a)
assert torch.equal(c.cpu(), a.cpu())
assert torch.cuda.memory_allocated(1) == 2 * 4096
print("ok")
