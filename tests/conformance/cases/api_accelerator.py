"""torch.accelerator answers for the CUDA devices (torch >= 2.6; memory API >= 2.9).

GPU: current_accelerator() is device("cuda"), device_count() matches torch.cuda,
memory_allocated() equals torch.cuda.memory_allocated(), current_device_index() follows
set_device_index().
Source: torch/accelerator/__init__.py and torch/accelerator/memory.py (they call
torch._C._accelerator_* for the current accelerator).
"""

import torch

assert torch.accelerator.is_available()
assert torch.accelerator.current_accelerator() == torch.device("cuda")
assert torch.accelerator.device_count() == torch.cuda.device_count() == 2
x = torch.ones(256, device="cuda")
assert torch.accelerator.memory_allocated() == torch.cuda.memory_allocated() == 1024
assert torch.accelerator.max_memory_allocated() >= 1024
free, total = torch.accelerator.get_memory_info()
assert total == torch.cuda.get_device_properties(0).total_memory and free < total
torch.accelerator.set_device_index(1)
assert torch.accelerator.current_device_index() == 1 == torch.cuda.current_device()
torch.accelerator.synchronize()
assert torch.accelerator.current_stream().device == torch.device("cuda", 1)

EXPECT = {"gpus": 2, "syncs": [{"kind": "synchronize", "line": 22}]}
