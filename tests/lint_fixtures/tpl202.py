import torch
from torch import nn


class Normalize(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)  # expect: TPL202
        std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
        self.register_buffer("std", std)  # near miss: registered
        self.table = torch.zeros(10)  # near miss: never used after __init__
        self.scale = torch.tensor(2.0)  # near miss: 0-dim
        self.weight = nn.Parameter(torch.zeros(3))  # near miss: a parameter
        self.offset = torch.ones(3)  # near miss: moved where it is used
        self.placed = torch.zeros(3, device="cuda")  # near miss: placed explicitly
        print(self.table.sum())

    def forward(self, x):
        y = (x - self.mean) / self.std * self.scale * self.weight.sum()
        return y + self.offset.to(x.device) + self.placed


class Child(Normalize):
    def __init__(self):
        super().__init__()
        self.bias = torch.zeros(3)  # expect: TPL202

    def extra(self, x):
        return x + self.bias


class NotAModule:
    def __init__(self):
        self.values = torch.zeros(3)  # near miss: not a module

    def total(self):
        return self.values.sum()
