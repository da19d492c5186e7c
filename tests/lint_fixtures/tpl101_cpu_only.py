# near miss: a file that never puts anything on an accelerator syncs with nothing
import torch

model = torch.nn.Linear(4, 1)
for x in [torch.randn(8, 4)]:
    loss = model(x).sum()
    loss.backward()
    print(loss.item())
