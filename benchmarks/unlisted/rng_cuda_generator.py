"""A torch.Generator('cuda') seeds draws on cuda; a CPU generator for a CUDA draw raises
RuntimeError.
"""

import torch

# torch.Generator(device="cuda") -> CUDAGeneratorImpl; aten/src/ATen/core/DistributionsHelper.h
# / check_generator: "Expected a 'cuda' device type for generator but found 'cpu'".
g = torch.Generator(device="cuda")
assert g.device.type == "cuda"
g.manual_seed(5)
a = torch.randn(8, device="cuda", generator=g)
g.manual_seed(5)
assert torch.equal(a, torch.randn(8, device="cuda", generator=g))
try:
    torch.randn(8, device="cuda", generator=torch.Generator())
except RuntimeError as e:
    assert "Expected a 'cuda' device type for generator but found 'cpu'" in str(e), str(e)
else:
    raise SystemExit("no error")
print("ok")
