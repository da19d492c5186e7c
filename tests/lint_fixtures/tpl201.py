import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        mask = torch.ones(x.shape[0], 8)  # expect: TPL201
        noise = torch.randn(x.shape)  # expect: TPL201
        idx = torch.tensor([0, 1])  # expect: TPL201
        pos = torch.arange(x.shape[1], device=x.device)  # near miss: device given
        scale = torch.tensor(0.5)  # near miss: a 0-dim scalar mixes with CUDA tensors
        moved = torch.zeros(8).to(x.device)  # near miss: moved at once (TPL206's case)
        buf = torch.zeros(8)  # near miss: moved on the next line
        buf = buf.to(x.device)
        like = torch.zeros_like(x)  # near miss: follows x
        with torch.device(x.device):
            inner = torch.zeros(8)  # near miss: inside a device context
        return self.proj(x) * mask + noise + pos + scale + moved + buf + like + inner + idx


def forward(x):
    return torch.zeros(3)  # near miss: a function, not a module's forward
