"""Pattern of pytorch/examples vae/main.py; written for this corpus (synthetic images).

An MLP VAE (784-400-20) with the reparameterisation trick ``mu + eps * std`` where
``eps = torch.randn_like(std)``; the loss is BCE(reduction="sum") plus the KL term; Adam;
``train_loss += loss.item()`` per batch; after each epoch a ``torch.no_grad()`` sample
``torch.randn(64, 20).to(device)`` decoded and viewed as images, moved back with ``.cpu()``.
GPU: the average training loss falls; the samples are in [0, 1].
"""

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(1)


class VAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc21, self.fc22 = nn.Linear(784, 400), nn.Linear(400, 20), nn.Linear(400, 20)
        self.fc3, self.fc4 = nn.Linear(20, 400), nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        return mu + torch.randn_like(std) * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        return self.decode(self.reparameterize(mu, logvar)), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    return bce - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())


images = (torch.rand(512, 1, 28, 28) > 0.7).float()  # binarised, as MNIST is nearly
loader = DataLoader(TensorDataset(images), batch_size=128, shuffle=True, pin_memory=True)
model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)
epoch_losses = []
for epoch in range(1, 4):
    model.train()
    train_loss = 0.0
    for (data,) in loader:
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    epoch_losses.append(train_loss / len(loader.dataset))
    print(f"====> Epoch: {epoch} Average loss: {epoch_losses[-1]:.4f}")
    with torch.no_grad():
        sample = torch.randn(64, 20).to(device)
        sample = model.decode(sample).cpu()
        grid = sample.view(64, 1, 28, 28)

assert epoch_losses[-1] < epoch_losses[0], epoch_losses
assert grid.device.type == "cpu" and grid.min() >= 0 and grid.max() <= 1

EXPECT = {"heavy": True, "values": ["real"]}
