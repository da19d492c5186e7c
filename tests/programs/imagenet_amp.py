"""Pattern of pytorch/examples imagenet/main.py (single GPU, ``--gpu 0``) with the AMP recipe
(torch.amp docs "Automatic Mixed Precision examples"); written for this corpus with a small
ResNet stand-in (torchvision does not import beside this torch).

``torch.cuda.set_device(args.gpu)``, ``model.cuda(args.gpu)``,
``criterion = nn.CrossEntropyLoss().cuda(args.gpu)``, ``cudnn.benchmark = True``; batches
``images.cuda(args.gpu, non_blocking=True)``; fp16 autocast with GradScaler; top-1/top-5
``accuracy()`` with ``topk`` and ``correct[:k].reshape(-1).float().sum(0, keepdim=True)``; an
AverageMeter updated with ``loss.item()``; ``save_checkpoint`` of ``state_dict`` dicts.
GPU: the loss falls; top-5 accuracy is at least top-1 accuracy.
"""

import os
import tempfile

import torch
import torch.backends.cudnn as cudnn
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.down(x))


def resnet(num_classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, 1, 1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(inplace=True),
        BasicBlock(16, 16, 1),
        BasicBlock(16, 32, 2),
        BasicBlock(32, 64, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, num_classes),
    )


def accuracy(output: torch.Tensor, target: torch.Tensor, topk=(1,)) -> list[torch.Tensor]:
    with torch.no_grad():
        maxk = max(topk)
        _, pred = output.topk(maxk, 1, True, True)
        correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
        return [
            correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / target.size(0))
            for k in topk
        ]


class AverageMeter:
    def __init__(self) -> None:
        self.sum, self.count = 0.0, 0

    def update(self, val: float, n: int = 1) -> None:
        self.sum, self.count = self.sum + val * n, self.count + n

    @property
    def avg(self) -> float:
        return self.sum / self.count


gpu = 0
torch.manual_seed(0)
torch.cuda.set_device(gpu)
cudnn.benchmark = True
model = resnet(10).cuda(gpu)
criterion = nn.CrossEntropyLoss().cuda(gpu)
optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
scaler = torch.amp.GradScaler("cuda")
labels = torch.arange(64) % 10
images = torch.randn(64, 3, 32, 32) * 0.3 + labels.view(-1, 1, 1, 1).float() / 5
loader = DataLoader(TensorDataset(images, labels), batch_size=16, shuffle=True, pin_memory=True)
epoch_loss = []
for epoch in range(3):
    losses, top1, top5 = AverageMeter(), AverageMeter(), AverageMeter()
    model.train()
    for images_b, target in loader:
        images_b = images_b.cuda(gpu, non_blocking=True)
        target = target.cuda(gpu, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.float16):
            output = model(images_b)
            loss = criterion(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.update(loss.item(), images_b.size(0))
        top1.update(acc1[0].item(), images_b.size(0))
        top5.update(acc5[0].item(), images_b.size(0))
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    epoch_loss.append(losses.avg)
    state = {
        "epoch": epoch + 1,
        "state_dict": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict(),
    }
    torch.save(state, os.path.join(tempfile.gettempdir(), "checkpoint.pth.tar"))
    print(f"epoch {epoch}: loss {losses.avg:.3f} acc@1 {top1.avg:.1f} acc@5 {top5.avg:.1f}")

assert epoch_loss[-1] < epoch_loss[0], epoch_loss
assert top5.avg >= top1.avg
assert torch.cuda.current_device() == gpu

EXPECT = {"heavy": True, "values": ["real"]}
