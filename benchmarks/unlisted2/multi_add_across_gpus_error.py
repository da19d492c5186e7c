"""cuda:0 + cuda:1 raises "found at least two devices, cuda:0 and cuda:1!" (order follows the
operands).
"""
# gpus: 2

import torch

# aten/src/ATen/TensorIterator.cpp compute_types: the common device is the first non-CPU
# operand's; another device fails with "Expected all tensors to be on the same device, but
# found at least two devices, <common> and <other>!" (RuntimeError).
a = torch.ones(2, device="cuda:0")
b = torch.ones(2, device="cuda:1")
pre = "Expected all tensors to be on the same device, but found at least two devices, "
for fn, want in ((lambda: a + b, "cuda:0 and cuda:1!"), (lambda: b * a, "cuda:1 and cuda:0!")):
    try:
        fn()
    except RuntimeError as e:
        assert str(e) == pre + want, str(e)
    else:
        raise SystemExit("no error")
# A 0-dim tensor on the other GPU is not a CPU scalar: refused too.
try:
    a + torch.tensor(1.0, device="cuda:1")
except RuntimeError as e:
    assert str(e) == pre + "cuda:0 and cuda:1!", str(e)
else:
    raise SystemExit("0-dim cuda:1 accepted")
print("ok")
