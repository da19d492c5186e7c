"""Pattern of the PyTorch tutorial "Optional: Data Parallelism" (beginner
data_parallel_tutorial); written for this corpus.

A model whose forward prints the input size it sees; wrapped in ``nn.DataParallel(model)``
when ``torch.cuda.device_count() > 1``, then ``model.to(device)``; a random-data DataLoader;
inputs moved with ``data.to(device)``.
GPU (2 GPUs): each replica sees half the batch; the output is gathered on cuda:0 with the
full batch size; a training step works through the wrapper.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

input_size, output_size, batch_size, data_size = 5, 2, 30, 100
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
seen: list[tuple[int, str]] = []


class RandomDataset(Dataset):
    def __init__(self, size: int, length: int) -> None:
        self.len, self.data = length, torch.randn(length, size)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.data[index]

    def __len__(self) -> int:
        return self.len


class Model(nn.Module):
    def __init__(self, input_size: int, output_size: int) -> None:
        super().__init__()
        self.fc = nn.Linear(input_size, output_size)

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        output = self.fc(inp)
        print("\tIn Model: input size", inp.size(), "output size", output.size())
        seen.append((inp.size(0), str(inp.device)))
        return output


rand_loader = DataLoader(RandomDataset(input_size, data_size), batch_size=batch_size, shuffle=True)
model = Model(input_size, output_size)
if torch.cuda.device_count() > 1:
    print("Let's use", torch.cuda.device_count(), "GPUs!")
    model = nn.DataParallel(model)
model.to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for data in rand_loader:
    inp = data.to(device)
    output = model(inp)
    print("Outside: input size", inp.size(), "output_size", output.size())
    assert output.device == torch.device("cuda", 0) and output.size(0) == inp.size(0)
    optimizer.zero_grad()
    output.pow(2).mean().backward()
    optimizer.step()

assert isinstance(model, nn.DataParallel)
assert {d for _, d in seen} == {"cuda:0", "cuda:1"}, seen
assert seen[0][0] == batch_size // 2, seen

EXPECT = {"gpus": 2, "values": ["real"]}
