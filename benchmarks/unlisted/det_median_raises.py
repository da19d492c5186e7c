"""use_deterministic_algorithms(True): median with indices on CUDA raises; warn_only=True warns
instead.
"""

import warnings

import torch

# torch/__init__.py use_deterministic_algorithms docstring: "torch.median with indices output
# when called on a CUDA tensor" throws RuntimeError; with warn_only a UserWarning
# (at::globalContext().alertNotDeterministic: "... does not have a deterministic implementation").
x = torch.randn(10, 5, device="cuda")
torch.use_deterministic_algorithms(True)
assert torch.are_deterministic_algorithms_enabled()
try:
    torch.median(x, dim=0)
except RuntimeError as e:
    assert "does not have a deterministic implementation" in str(e), str(e)
else:
    raise SystemExit("no error")
torch.median(x)  # no indices: fine
torch.use_deterministic_algorithms(True, warn_only=True)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    torch.median(x, dim=0)
assert any("does not have a deterministic implementation" in str(m.message) for m in w)
print("ok")
