"""float8_e4m3fn tensors can be made on an H100 and cast back; 448 is the largest finite value."""

import torch

# c10/util/Float8_e4m3fn.h: max finite 448; aten copy kernels (Copy.cu) cast to and from
# float8 on CUDA. torch.finfo(torch.float8_e4m3fn).max == 448.
x = torch.tensor([1.0, 0.5, 448.0, 3.3], device="cuda")
f8 = x.to(torch.float8_e4m3fn)
assert f8.dtype == torch.float8_e4m3fn and f8.device.type == "cuda"
assert f8.element_size() == 1
back = f8.float().cpu().tolist()
assert back[:3] == [1.0, 0.5, 448.0] and back[3] == 3.25, back
print("ok")
