"""mem_get_info() is (free, total): total equals the properties' total_memory, free drops as memory
is reserved.
"""

import torch

# torch/cuda/memory.py mem_get_info -> cudaMemGetInfo(device): free includes what other
# processes and the context take; total == cudaDeviceProp.totalGlobalMem.
free0, total = torch.cuda.mem_get_info()
assert total == torch.cuda.get_device_properties(0).total_memory
assert 0 < free0 < total
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # 1 GiB reserved
free1, total1 = torch.cuda.mem_get_info()
assert total1 == total
assert free0 - free1 >= 1 << 30, (free0, free1)
print("ok")
