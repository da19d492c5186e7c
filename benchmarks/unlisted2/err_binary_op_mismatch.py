"""cuda_t + cpu_t (not a 0-dim scalar) raises TensorIterator's "found at least two devices, cuda:0
and cpu!".
"""

import torch

# aten/src/ATen/TensorIterator.cpp compute_types: the common device is the first non-CPU
# operand's; any other operand on another device (other than a 0-dim CPU scalar) fails with
# TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two
# devices, ", common_device, " and ", op.device.value(), "!") - a RuntimeError. add/mul/sub are
# TensorIterator ops (native_functions.yaml: device_check: NoCheck # TensorIterator).
want = (
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
)
g = torch.ones(3, device="cuda")
c = torch.ones(3)
for fn in (lambda: g + c, lambda: c + g, lambda: g * c, lambda: torch.sub(c, g), lambda: g.add_(c)):
    try:
        fn()
    except RuntimeError as e:
        assert str(e) == want, str(e)
    else:
        raise SystemExit("no error")
print("ok")
