"""Pattern of pytorch/examples dcgan/main.py; written for this corpus (32x32 synthetic images).

Generator of ConvTranspose2d-BatchNorm-ReLU blocks with Tanh, discriminator of
Conv2d-BatchNorm-LeakyReLU blocks with Sigmoid, ``weights_init`` applied with ``apply``;
``fixed_noise = torch.randn(..., device=device)``; labels made with
``torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)`` and
``label.fill_(fake_label)``; D trained on real then ``fake.detach()``, G through D with the
real label; two Adam optimizers with betas (0.5, 0.999); D(x), D(G(z)) read with ``.mean().item()``.
GPU: the losses are finite and the fakes from fixed_noise have the image shape.
"""

import math

import torch
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
torch.manual_seed(999)
nz, ngf, ndf, nc = 16, 16, 16, 3


def weights_init(m: nn.Module) -> None:
    name = m.__class__.__name__
    if name.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif name.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


netG = nn.Sequential(
    nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),
    nn.BatchNorm2d(ngf * 4),
    nn.ReLU(True),
    nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
    nn.BatchNorm2d(ngf * 2),
    nn.ReLU(True),
    nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
    nn.BatchNorm2d(ngf),
    nn.ReLU(True),
    nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
    nn.Tanh(),
).to(device)
netD = nn.Sequential(
    nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
    nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
    nn.BatchNorm2d(ndf * 2),
    nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
    nn.BatchNorm2d(ndf * 4),
    nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False),
    nn.Sigmoid(),
).to(device)
netG.apply(weights_init)
netD.apply(weights_init)

criterion = nn.BCELoss()
fixed_noise = torch.randn(16, nz, 1, 1, device=device)
real_label, fake_label = 1.0, 0.0
optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
images = torch.tanh(torch.randn(128, nc, 32, 32))
dataloader = DataLoader(TensorDataset(images), batch_size=32, shuffle=True)

history = []
for epoch in range(2):
    for (data,) in dataloader:
        netD.zero_grad()
        real_cpu = data.to(device)
        b_size = real_cpu.size(0)
        label = torch.full((b_size,), real_label, dtype=real_cpu.dtype, device=device)
        output = netD(real_cpu).view(-1)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        noise = torch.randn(b_size, nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach()).view(-1)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        errD = errD_real + errD_fake
        optimizerD.step()

        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake).view(-1)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        history.append((errD.item(), errG.item(), D_x, D_G_z2))
    print(f"[{epoch}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} D(x): {D_x:.4f}")

with torch.no_grad():
    fake = netG(fixed_noise).detach().cpu()
assert fake.shape == (16, nc, 32, 32) and fake.abs().max() <= 1
assert all(math.isfinite(v) for row in history for v in row)
assert 0 < D_x < 1

EXPECT = {"heavy": True, "values": ["real"]}
