"""Pattern of the PyTorch tutorial "Single-Machine Model Parallel Best Practices"
(intermediate/model_parallel_tutorial); written for this corpus.

ToyModel with ``net1`` on cuda:0 and ``net2`` on cuda:1, the activation moved between them
with ``x.to("cuda:1")``; the labels moved to the output's device
(``labels.to(outputs.device)``); then the pipelined variant that splits the batch into
micro-batches and overlaps the two halves.
GPU (2 GPUs): the output is on cuda:1; gradients reach both halves; the loss falls.
"""

import torch
from torch import nn, optim


class ToyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net1 = torch.nn.Linear(10, 10).to("cuda:0")
        self.relu = torch.nn.ReLU()
        self.net2 = torch.nn.Linear(10, 5).to("cuda:1")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.net1(x.to("cuda:0")))
        return self.net2(x.to("cuda:1"))


class PipelineModel(ToyModel):
    def __init__(self, split_size: int) -> None:
        super().__init__()
        self.split_size = split_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        splits = iter(x.split(self.split_size, dim=0))
        s_prev = self.relu(self.net1(next(splits).to("cuda:0"))).to("cuda:1")
        ret = []
        for s_next in splits:
            ret.append(self.net2(s_prev))
            s_prev = self.relu(self.net1(s_next.to("cuda:0"))).to("cuda:1")
        ret.append(self.net2(s_prev))
        return torch.cat(ret)


torch.manual_seed(0)
for model in (ToyModel(), PipelineModel(split_size=5)):
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(model.parameters(), lr=0.05)
    inputs, labels = torch.randn(20, 10), torch.randn(20, 5)
    losses = []
    for _ in range(10):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = loss_fn(outputs, labels.to(outputs.device))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert outputs.device == torch.device("cuda", 1)
    assert model.net1.weight.grad.device == torch.device("cuda", 0)
    assert losses[-1] < losses[0], losses

EXPECT = {
    "gpus": 2,
    "values": ["real"],
    "transfers": {"d2d": {"count": 100}},
}  # per step: 1 + 4 activation copies forward, as many gradients back
