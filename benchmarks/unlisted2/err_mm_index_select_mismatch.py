"""mm / index_select with a CPU argument name the argument and the CUDA wrapper in the error."""

import torch

# aten/src/ATen/core/adaption.cpp common_device_check_failure (the 2.14.1 wheel's text):
# "Expected all tensors to be on the same device, but got <arg> is on <device>, different from
# other tensors on <common device> (when checking argument in method <wrapper>)"; the
# generated RegisterCUDA.cpp wrappers are wrapper_CUDA_mm and wrapper_CUDA__index_select.
# torch <= 2.6 said "... but found at least two devices, cuda:0 and cpu! (when checking argument
# for argument mat2 in method wrapper_CUDA_mm)".
a = torch.ones(2, 2, device="cuda")
try:
    torch.mm(a, torch.ones(2, 2))
except RuntimeError as e:
    assert str(e) == (
        "Expected all tensors to be on the same device, but got mat2 is on cpu, different from"
        " other tensors on cuda:0 (when checking argument in method wrapper_CUDA_mm)"
    ), str(e)
else:
    raise SystemExit("mm: no error")
try:
    torch.index_select(a, 0, torch.tensor([0]))
except RuntimeError as e:
    assert str(e) == (
        "Expected all tensors to be on the same device, but got index is on cpu, different from"
        " other tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)"
    ), str(e)
else:
    raise SystemExit("index_select: no error")
print("ok")
