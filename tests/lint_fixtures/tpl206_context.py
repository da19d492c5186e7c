import torch
from torch._subclasses.fake_tensor import FakeTensorMode

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
gen = torch.Generator().manual_seed(0)

for _ in range(100):
    noise = torch.randn(16, 8, generator=gen).to(device)  # near miss: a CPU generator's numbers
mask = torch.ones(16, 8).to(device)  # expect: TPL206
with FakeTensorMode():
    big = torch.zeros(1 << 20).to(device)  # near miss: fake, no data


def test_inputs():
    x = torch.randn(4, 8).to(device)  # near miss: a test draws on the CPU for reproducible inputs
    ids = torch.arange(4).to(device)  # expect: TPL206
    return x, ids
