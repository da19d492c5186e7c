"""`with torch.cuda.device(i):` makes cuda:i current inside the block and restores it after.

GPU: inside the block torch.cuda.current_device() is i and torch.ones(2, device="cuda")
lands on cuda:i; after it the previous device is current again. torch.cuda.device enters
through torch.cuda._exchange_device, which torch binds at import to the
torch._C._cuda_exchangeDevice binding (a stub raising "PyTorch was compiled without CUDA
support" on a CPU build), so answering the binding alone does not reach it. The same
context manager is what torch.load and UntypedStorage.to(device="cuda") use (torch/_utils.py
_to), so checkpoints with CUDA tensors depend on it.
Source: torch/cuda/__init__.py (class device, _exchange_device, _maybe_exchange_device);
torch/_utils.py _to. Found by skorch's test_pickle_save_and_load_mixed_devices under
pytest --sim-gpu.
"""

import torch

assert torch.cuda.current_device() == 0
with torch.cuda.device(1):
    assert torch.cuda.current_device() == 1
    x = torch.ones(2, device="cuda")
assert x.device == torch.device("cuda", 1), x.device
assert torch.cuda.current_device() == 0
with torch.cuda.device(torch.device("cuda", 1)):
    assert torch.cuda.current_device() == 1
s = torch.UntypedStorage(8).to(device="cuda:1")
assert s.device == torch.device("cuda", 1), s.device

EXPECT = {"gpus": 2}
