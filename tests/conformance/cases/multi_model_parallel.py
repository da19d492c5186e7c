"""Naive model parallelism: layers on cuda:0 and cuda:1 train with the default optimizer.

GPU: activations move cuda:0 -> cuda:1 in forward and the gradient moves back in backward
(device-to-device copies); AdamW's default foreach implementation groups parameters by
device, so a model spread over two GPUs steps without error.
Source: PyTorch tutorial "Single-Machine Model Parallel Best Practices"
(intermediate/model_parallel_tutorial); torch/optim/optimizer.py
_group_tensors_by_device_and_dtype (foreach kernels need one device per group).
"""

import torch
from torch import nn


class TwoGPUNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net1 = nn.Linear(16, 32).to("cuda:0")
        self.net2 = nn.Linear(32, 4).to("cuda:1")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net2(torch.relu(self.net1(x.to("cuda:0"))).to("cuda:1"))


torch.manual_seed(0)
model = TwoGPUNet()
opt = torch.optim.AdamW(model.parameters(), lr=0.1)
x, y = torch.randn(64, 16), torch.randn(64, 4)
first = None
for _ in range(5):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y.to("cuda:1"))
    loss.backward()
    opt.step()
    first = first if first is not None else loss.item()
assert model.net1.weight.grad.device == torch.device("cuda", 0)
assert model.net2.weight.grad.device == torch.device("cuda", 1)
assert opt.state[model.net1.weight]["exp_avg"].device == torch.device("cuda", 0)
assert loss.item() < first
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # grouped by device as well

EXPECT = {
    "gpus": 2,
    "values": ["real"],
    # forward 5 x (64x32 fp32 activations to cuda:1); backward 5 x their gradient back;
    # clip_grad_norm_ (torch/nn/utils/clip_grad.py) moves the norms of cuda:1's two
    # gradients to cuda:0 and the clip factor back (4 B each)
    "transfers": {"d2d": {"count": 13, "bytes": 81932}},
}
