"""torch.cuda.set_stream(s) makes s current until set back; set_stream(None) is a no-op."""

import torch

# torch/cuda/__init__.py set_stream: "Set the current stream ... This function is a no-op if
# this argument is None"; current_stream() returns the stream last set on the device.
d = torch.cuda.default_stream()
s = torch.cuda.Stream()
assert torch.cuda.current_stream() == d
torch.cuda.set_stream(s)
assert torch.cuda.current_stream() == s
assert torch.cuda.current_stream().cuda_stream == s.cuda_stream
torch.cuda.set_stream(None)
assert torch.cuda.current_stream() == s
x = torch.ones(4, device="cuda") * 2  # work queued on s
s.synchronize()
assert x.sum().item() == 8.0
torch.cuda.set_stream(d)
assert torch.cuda.current_stream() == d
print("ok")
