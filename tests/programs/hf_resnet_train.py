"""Pattern of transformers ResNet image classification (``ResNetForImageClassification``)
trained in a plain loop with ``channels_last``; written for this corpus, random weights.

BatchNorm in train mode (running statistics updated on the GPU), ``model.to(device,
memory_format=torch.channels_last)``, inputs ``.to(device, memory_format=torch.channels_last)``,
SGD with momentum and ``CosineAnnealingLR``, ``torch.no_grad()`` evaluation, and the
BatchNorm running mean read back on the host.
GPU: the loss falls; the running statistics moved from their initial zeros.
"""

import torch
from transformers import ResNetConfig, ResNetForImageClassification

device = torch.device("cuda")
torch.manual_seed(0)
config = ResNetConfig(
    num_channels=3,
    embedding_size=16,
    hidden_sizes=[16, 32],
    depths=[1, 1],
    layer_type="basic",
    num_labels=3,
)
model = ResNetForImageClassification(config).to(device, memory_format=torch.channels_last)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=15)
labels = torch.arange(24) % 3
images = torch.randn(24, 3, 32, 32) + labels.view(-1, 1, 1, 1).float()
losses = []
model.train()
for _ in range(15):
    x = images.to(device, memory_format=torch.channels_last)
    out = model(pixel_values=x, labels=labels.to(device))
    optimizer.zero_grad()
    out.loss.backward()
    optimizer.step()
    scheduler.step()
    losses.append(out.loss.item())

model.eval()
with torch.no_grad():
    pred = model(pixel_values=x).logits.argmax(-1).cpu()
bn = next(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
assert bn.running_mean.is_cuda and bn.running_mean.abs().sum().cpu() > 0
assert losses[-1] < losses[0], losses
assert pred.shape == (24,)

EXPECT = {"heavy": True, "values": ["real"]}
