"""A Lightning module and a custom autograd function for a segmentation model."""
import lightning as L
import torch
import torch.nn.functional as F
from torch.cuda.amp import custom_bwd, custom_fwd


class ScaledGelu(torch.autograd.Function):
    @staticmethod
    @custom_fwd  # planted: TPL402
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return F.gelu(x) * scale

    @staticmethod
    @custom_bwd  # planted: TPL402
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            y = F.gelu(x) * ctx.scale
            (g,) = torch.autograd.grad(y, x, grad)
        return g, None


class SegModel(L.LightningModule):
    def __init__(self, backbone, classes):
        super().__init__()
        self.backbone = backbone
        self.head = torch.nn.Conv2d(256, classes, 1)
        self.class_weights = torch.tensor([1.0] + [2.0] * (classes - 1))  # planted: TPL202

    def forward(self, x):
        return self.head(ScaledGelu.apply(self.backbone(x), 1.0))

    def training_step(self, batch, batch_idx):
        images, masks = batch
        logits = self(images)
        loss = F.cross_entropy(logits, masks, weight=self.class_weights)
        self.log("train/loss", loss.item())  # planted: TPL101
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)
