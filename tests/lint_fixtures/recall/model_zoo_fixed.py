"""A small vision-transformer library module (models only, no training)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class PatchEmbed(nn.Module):
    def __init__(self, img_size=224, patch=16, dim=384):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, patch)
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def forward(self, x):
        x = (x - self.mean) / self.std
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim, heads, drop_path=0.1):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.drop_path = drop_path

    def forward(self, x, causal=False):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        if causal:
            mask = torch.ones(n, n, device=x.device).triu(1).bool()
            scores = scores.masked_fill(mask, float("-inf"))
        if self.training and torch.rand(1) < self.drop_path:
            return x
        out = F.softmax(scores, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


class ViT(nn.Module):
    def __init__(self, depth=6, dim=384, heads=6, classes=1000):
        super().__init__()
        self.embed = PatchEmbed(dim=dim)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.blocks = nn.ModuleList(Attention(dim, heads) for _ in range(depth))
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.embed(x)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        positions = torch.arange(x.shape[1], device=x.device)
        x = x + self.pos_embedding(positions)
        for block in self.blocks:
            x = x + block(x)
        return self.head(x[:, 0])
