import torch
import torch.nn as nn
from somewhere import BaseTransform


class Dropout(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        if self.training and torch.rand(1) < self.p:  # near miss: a host-side coin flip
            return x
        n = torch.randint(0, x.shape[0], (1,)).item()  # near miss: read on the host
        keep = torch.randperm(x.shape[1])  # near miss: only an index
        x = x[:, keep]
        k = torch.randint(1, 4, ())  # near miss: only a slice bound
        eye = torch.eye(8, out=torch.empty_like(x[:8, :8]))  # near miss: out= decides
        noise = torch.randn(x.shape, generator=self.gen)  # near miss: the generator decides
        mask = torch.ones(x.shape[0], 8)  # expect: TPL201
        return self.proj(x[n:][:k]) * mask + eye + noise


class RandomFlip(BaseTransform):
    # near miss: forward() of a data transform that holds no parameters: not a module
    def forward(self, data):
        data.flip = torch.rand(data.num_nodes) < 0.5
        return data


class Transform(nn.Module):
    def forward(self, x):
        return x + torch.zeros(3, x.shape[-1])  # expect: TPL201


def test_module_on_cpu():
    class Tiny(nn.Module):
        def forward(self):
            return torch.rand(1, 10)  # near miss: a CPU unit test's module

    assert Tiny()().shape == (1, 10)
