"""torch.testing.assert_close(cuda, cpu) fails on the device attribute: 'cuda:0 != cpu'."""

import torch

# torch/testing/_comparison.py TensorLikePair._compare_attributes: check_device=True ->
# "The values for attribute 'device' do not match: {actual} != {expected}."
x = torch.ones(3, device="cuda")
try:
    torch.testing.assert_close(x, torch.ones(3))
except AssertionError as e:
    assert "The values for attribute 'device' do not match: cuda:0 != cpu." in str(e), str(e)
else:
    raise SystemExit("no error")
torch.testing.assert_close(x, torch.ones(3), check_device=False)
print("ok")
