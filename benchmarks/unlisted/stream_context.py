"""with torch.cuda.stream(s): current_stream() is s; afterwards the default again; stream(None) is
a no-op.
"""

import torch

# torch/cuda/__init__.py StreamContext: sets torch.cuda.set_stream on enter, restores on exit;
# "If the selected stream is None, this context manager is a no-op".
s = torch.cuda.Stream()
assert s != torch.cuda.default_stream()
with torch.cuda.stream(s):
    assert torch.cuda.current_stream() == s
    y = torch.ones(4, device="cuda") * 2
with torch.cuda.stream(None):
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
assert torch.cuda.current_stream() == torch.cuda.default_stream()
torch.cuda.current_stream().wait_stream(s)
assert y.sum().item() == 8.0
print("ok")
