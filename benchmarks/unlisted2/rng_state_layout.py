"""torch.cuda.get_rng_state() is 16 CPU uint8 bytes: the seed then the Philox offset (a multiple of
4).
"""

import torch

# aten/src/ATen/cuda/CUDAGeneratorImpl.cpp get_state: seed_size = sizeof(uint64_t), offset_size =
# sizeof(int64_t), a CPU byte tensor of seed_size + offset_size holding the current seed then
# philox_offset_per_thread; offsets advance in multiples of 4 (philox_cuda_state rounds the
# increment up to a multiple of 4). torch/random.py manual_seed also seeds every CUDA device.
torch.manual_seed(123)
st = torch.cuda.get_rng_state()
assert st.dtype == torch.uint8 and st.device.type == "cpu" and st.numel() == 16, st
assert int.from_bytes(bytes(st[:8].tolist()), "little") == 123
assert int.from_bytes(bytes(st[8:].tolist()), "little") == 0
assert torch.cuda.initial_seed() == 123
torch.randn(1000, device="cuda")
off = int.from_bytes(bytes(torch.cuda.get_rng_state()[8:].tolist()), "little")
assert off > 0 and off % 4 == 0, off
states = torch.cuda.get_rng_state_all()
assert isinstance(states, list) and len(states) == torch.cuda.device_count() == 1
torch.cuda.manual_seed(7)
assert torch.cuda.initial_seed() == 7
assert torch.initial_seed() == 123  # the CPU generator is untouched by torch.cuda.manual_seed
print("ok")
