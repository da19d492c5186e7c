"""torch.Generator(device="cuda") draws CUDA random numbers; a CPU generator cannot.

GPU: a CUDA generator made for "cuda" reports device "cuda" (no index: the generator keeps
the index it was given, -1; an H200 with torch 2.11 failed this case's first version, which
expected cuda:0), one made for "cuda:0" reports cuda:0; it seeds reproducibly (the same seed gives the
same values), and feeds torch.randn(..., device="cuda", generator=g). Passing a CPU
generator to a CUDA factory raises "Expected a 'cuda' device type for generator but found
'cpu'".
Source: aten/src/ATen/core/Generator.h check_generator; torch/csrc/Generator.cpp
(THPGenerator_pynew: make_generator<CUDAGeneratorImpl>(device.index())); pytorch/pytorch#58545
("Expected a 'cuda:0' generator device but found 'cuda'").
"""

import torch

g = torch.Generator(device="cuda")
assert g.device == torch.device("cuda") and g.device.index is None
assert torch.Generator(device="cuda:0").device == torch.device("cuda", 0)
assert torch.cuda.default_generators[0].device == torch.device("cuda", 0)
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
