"""with torch.cuda.device(1): current_device() is 1 and new 'cuda' tensors land on cuda:1; restored
after.
"""
# gpus: 2

import torch

# torch/cuda/__init__.py class device: __enter__ exchanges the current device
# (torch.cuda._exchange_device), __exit__ restores it; a bare "cuda" device resolves to the
# current device (c10::impl::VirtualGuardImpl / empty_cuda takes the current device).
assert torch.cuda.current_device() == 0
with torch.cuda.device(1):
    assert torch.cuda.current_device() == 1
    t = torch.zeros(2, device="cuda")
    assert t.device == torch.device("cuda", 1), t.device
assert torch.cuda.current_device() == 0
assert torch.zeros(1, device="cuda").device == torch.device("cuda", 0)
print("ok")
