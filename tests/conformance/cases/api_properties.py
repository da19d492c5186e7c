"""get_device_properties() exposes every field torch's _CudaDeviceProperties has.

GPU: an H100 SXM reports name "NVIDIA H100 80GB HBM3", compute capability 9.0, 132 SMs,
warp size 32, an L2 cache of 50 MiB and the other fields below.
Source: torch/csrc/cuda/Module.cpp (the _CudaDeviceProperties bindings: the attribute names
below, read from libtorch_python.so of torch 2.14.1+cu130); NVIDIA H100 whitepaper.
"""

import torch

p = torch.cuda.get_device_properties(0)
assert p.name == "NVIDIA H100 80GB HBM3" == torch.cuda.get_device_name(0)
assert (p.major, p.minor) == (9, 0) == torch.cuda.get_device_capability(0)
assert p.multi_processor_count == 132 and p.warp_size == 32
assert p.L2_cache_size == 50 * 1024**2
for field in (
    "total_memory", "is_integrated", "is_multi_gpu_board", "max_threads_per_multi_processor",
    "max_threads_per_block", "regs_per_multiprocessor", "shared_memory_per_block",
    "shared_memory_per_block_optin", "shared_memory_per_multiprocessor", "memory_bus_width",
    "memory_clock_rate", "uuid", "gcnArchName", "pci_bus_id", "pci_device_id", "pci_domain_id",
):  # fmt: skip
    assert hasattr(p, field), field
assert p.total_memory > 79 * 1024**3

EXPECT = {"gpu": "H100"}
