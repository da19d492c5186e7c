"""An H100's properties: compute capability 9.0, 132 SMs, about 79.6 GiB, warp size 32."""

import torch

# torch/cuda/__init__.py get_device_properties -> cudaGetDeviceProperties; values from
# NVIDIA's H100 whitepaper (SXM5: 132 SMs, 50 MB L2, 2048 threads and 64K registers per SM,
# 227 KB of opt-in shared memory per block) and the CUDA C Programming Guide's table for 9.0.
p = torch.cuda.get_device_properties(0)
assert "H100" in p.name, p.name
assert (p.major, p.minor) == (9, 0), (p.major, p.minor)
assert p.multi_processor_count == 132, p.multi_processor_count
assert p.warp_size == 32, p.warp_size
assert p.max_threads_per_multi_processor == 2048, p.max_threads_per_multi_processor
assert p.regs_per_multiprocessor == 65536, p.regs_per_multiprocessor
assert p.L2_cache_size == 50 * 1024 * 1024, p.L2_cache_size
# nvidia-smi reports 81559 MiB on the H100 80GB HBM3; what cudaGetDeviceProperties gives
# (totalGlobalMem) is in that neighbourhood: between 78 and 80 GiB.
assert 78 * 2**30 < p.total_memory < 80 * 2**30, p.total_memory
assert not p.is_integrated
print("ok", p.name)
