"""Factories make page-locked host tensors with pin_memory=True (DataLoader, prefetchers).

GPU: torch.empty/zeros/ones/full/rand/randn(..., pin_memory=True) return CPU tensors whose
is_pinned() is True; the default is pageable memory. A CPU-only build of torch raises
"pin_memory=True requires a CUDA or other accelerator backend; no pinned memory
allocator is available on this system." instead (torch 2.13), so without the simulator
this script fails.
Source: aten/src/ATen/native/TensorFactories.cpp (empty_cpu: pin_memory uses the
accelerator's host allocator); torch docs "torch.empty" (pin_memory argument).
"""

import torch

made = [
    torch.empty(8, pin_memory=True),
    torch.zeros(8, pin_memory=True),
    torch.ones(2, 3, pin_memory=True),
    torch.full((4,), 7.0, pin_memory=True),
    torch.randn(4, pin_memory=True),
    torch.empty(1024, dtype=torch.uint8, pin_memory=True),
]
assert all(t.device.type == "cpu" and t.is_pinned() for t in made)
assert not torch.empty(8).is_pinned()
assert torch.equal(made[3], torch.full((4,), 7.0))
on_gpu = made[2].to("cuda", non_blocking=True)
assert on_gpu.is_cuda and on_gpu.shape == (2, 3)

EXPECT = {}
