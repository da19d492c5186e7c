"""A CPU torch.Generator passed to a cuda factory raises; a cuda Generator reproduces its draws."""

import torch

# aten/src/ATen/core/DistributionsHelper.h / check_generator: "Expected a '" << device type <<
# "' device type for generator but found '" << gen device type << "'" (RuntimeError);
# torch.Generator(device="cuda") is make_generator<CUDAGeneratorImpl>(device.index())
# (torch/csrc/Generator.cpp THPGenerator_pynew), a CUDA generator; with no index given its
# device is reported as device(type='cuda') (CUDAGeneratorImpl: Device(CUDA, device_index)).
try:
    torch.randn(3, device="cuda", generator=torch.Generator())
except RuntimeError as e:
    assert "Expected a 'cuda' device type for generator but found 'cpu'" in str(e), str(e)
else:
    raise SystemExit("no error")
g = torch.Generator(device="cuda")
assert g.device.type == "cuda"
g.manual_seed(3)
a = torch.randn(5, device="cuda", generator=g)
g.manual_seed(3)
b = torch.randn(5, device="cuda", generator=g)
assert torch.equal(a, b)
assert g.initial_seed() == 3
assert g.get_state().numel() == 16
print("ok")
