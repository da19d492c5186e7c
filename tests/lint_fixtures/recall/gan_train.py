"""DCGAN-style training with a gradient penalty and per-step logging."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision_like import datasets, transforms

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=25)
parser.add_argument("--latent", type=int, default=100)
parser.add_argument("--log-every", type=int, default=100)
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Generator(nn.Module):
    def __init__(self, latent):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(latent, 784), nn.Tanh())

    def forward(self, z):
        return self.net(z).view(-1, 1, 28, 28)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 1))

    def forward(self, x):
        return self.net(x)


def gradient_penalty(critic, real, fake):
    alpha = torch.rand(real.size(0), 1, 1, 1).to(device)  # planted: TPL206
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    scores = critic(mixed)
    grads = torch.autograd.grad(scores, mixed, torch.ones_like(scores), create_graph=True)[0]
    return ((grads.flatten(1).norm(dim=1) - 1) ** 2).mean()


G, D = Generator(args.latent).to(device), Discriminator().to(device)
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
loader = DataLoader(datasets.MNIST("data", transform=transforms.ToTensor()), batch_size=64,
                    shuffle=True, pin_memory=True)
history = []
for epoch in range(args.epochs):
    for step, (real, _) in enumerate(loader):
        real = real.to(device, non_blocking=True)
        z = torch.randn(real.size(0), args.latent, device=device)
        fake = G(z)
        d_loss = D(fake.detach()).mean() - D(real).mean() + 10 * gradient_penalty(D, real, fake)
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()

        g_loss = -D(fake).mean()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        if torch.isnan(g_loss):  # planted: TPL103
            raise RuntimeError("generator diverged")
        history.append(g_loss)  # planted: TPL303
        if step % args.log_every == 0:
            print(f"epoch {epoch} step {step}: D {d_loss.item():.3f} G {g_loss.item():.3f}")
        else:
            print(f"step {step}: G {g_loss:.3f}", end="\r")  # planted: TPL102
        torch.cuda.empty_cache()  # planted: TPL104
    torch.save(G.state_dict(), f"generator_{epoch}.pt")
