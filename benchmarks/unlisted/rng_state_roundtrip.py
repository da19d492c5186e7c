"""get_rng_state() is a CPU uint8 tensor; set_rng_state() replays the same draws."""

import torch

# torch/cuda/random.py get_rng_state: "Return the random number generator state of the
# specified GPU as a ByteTensor" (on the CPU); set_rng_state restores it.
torch.cuda.manual_seed(0)
st = torch.cuda.get_rng_state()
assert st.dtype == torch.uint8 and st.device.type == "cpu"
a = torch.randn(10, device="cuda")
torch.cuda.set_rng_state(st)
assert torch.equal(a, torch.randn(10, device="cuda"))
assert len(torch.cuda.get_rng_state_all()) == torch.cuda.device_count()
print("ok")
