"""cuda_t.to("cpu", non_blocking=True) returns a tensor in pinned host memory; a blocking one
doesn't.
"""

import torch

# aten/src/ATen/native/TensorConversions.cpp _to_copy: "bool pin_out = (non_blocking &&
# <self on an accelerator> && options.device().is_cpu() && (options.layout() == c10::kStrided))"
# and the result is allocated with pin_memory=pin_out.
g = torch.arange(6.0, device="cuda")
h = g.to("cpu", non_blocking=True)
assert h.device.type == "cpu" and h.is_pinned()
torch.cuda.synchronize()
assert h.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
assert not g.to("cpu").is_pinned()
assert not g.cpu().is_pinned()
print("ok")
