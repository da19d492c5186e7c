"""Pattern of transformers image classification fine-tuning with ViT (the docs' "Image
classification" task guide, in a plain PyTorch loop); written for this corpus.

``ViTForImageClassification(ViTConfig(...))`` with random weights; ``pixel_values`` batches from
a DataLoader with ``pin_memory=True`` moved with ``non_blocking=True``; fp16 autocast with a
``torch.amp.GradScaler``; eval with ``model.eval()`` and ``torch.inference_mode()``.
GPU: the loss falls; eval logits are (batch, num_labels).
"""

import torch
from torch.utils.data import DataLoader, TensorDataset
from transformers import ViTConfig, ViTForImageClassification

device = "cuda"
torch.manual_seed(0)
config = ViTConfig(
    image_size=32,
    patch_size=8,
    num_channels=3,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    num_labels=4,
)
model = ViTForImageClassification(config).to(device)
labels = torch.arange(64) % 4
images = torch.randn(64, 3, 32, 32) * 0.5 + labels.view(-1, 1, 1, 1).float()  # class = brightness
loader = DataLoader(TensorDataset(images, labels), batch_size=16, shuffle=True, pin_memory=True)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cuda")
losses = []
for _ in range(3):
    model.train()
    for pixel_values, y in loader:
        pixel_values = pixel_values.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(pixel_values=pixel_values, labels=y).loss
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())

model.eval()
with torch.inference_mode():
    logits = model(pixel_values=images[:8].to(device)).logits
assert logits.shape == (8, 4) and logits.is_cuda
assert sum(losses[-4:]) < sum(losses[:4]), losses

EXPECT = {"heavy": True, "values": ["real"]}
