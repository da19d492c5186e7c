"""torch.cuda.amp.autocast() and GradScaler() warn FutureWarning naming torch.amp."""

import warnings

import torch

# torch/cuda/amp/autocast_mode.py and grad_scaler.py:
#   @deprecated("`torch.cuda.amp.autocast(args...)`
# is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.", category=FutureWarning)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    with torch.cuda.amp.autocast():
        y = torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")
    torch.cuda.amp.GradScaler()
msgs = [str(x.message) for x in w if issubclass(x.category, FutureWarning)]
assert any("torch.amp.autocast('cuda', args...)" in m for m in msgs), msgs
assert any("torch.amp.GradScaler('cuda', args...)" in m for m in msgs), msgs
assert y.dtype == torch.float16
print("ok")
