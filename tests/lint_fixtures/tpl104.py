import torch

model = torch.nn.Linear(4, 1).to("cuda")
data = [torch.randn(8, 4, device="cuda")]

for x in data:
    loss = model(x).sum()
    loss.backward()
    torch.cuda.empty_cache()  # expect: TPL104

for epoch in range(3):
    for x in data:
        loss = model(x).sum()
        loss.backward()
    torch.cuda.empty_cache()  # near miss: once per epoch

for step, x in enumerate(data):
    loss = model(x).sum()
    loss.backward()
    if step % 1000 == 0:
        torch.cuda.empty_cache()  # near miss: every 1000 steps
