"""torch.Generator(device="cuda") draws CUDA random numbers; a CPU generator cannot.

GPU: a CUDA generator reports device cuda:0, seeds reproducibly (the same seed gives the
same values), and feeds torch.randn(..., device="cuda", generator=g). Passing a CPU
generator to a CUDA factory raises "Expected a 'cuda' device type for generator but found
'cpu'".
Source: aten/src/ATen/core/Generator.h check_generator; torch/csrc/Generator.cpp.
"""

import torch

g = torch.Generator(device="cuda")
assert g.device == torch.device("cuda", 0)
g.manual_seed(1234)
a = torch.randn(8, device="cuda", generator=g)
g.manual_seed(1234)
b = torch.randn(8, device="cuda", generator=g)
assert a.is_cuda and torch.equal(a, b)
assert g.initial_seed() == 1234
try:
    torch.randn(2, device="cuda", generator=torch.Generator())
except RuntimeError as e:
    assert "Expected a 'cuda' device type for generator but found 'cpu'" in str(e), e
else:
    raise AssertionError("a CPU generator was accepted by a CUDA factory")

EXPECT = {"values": ["real"]}
