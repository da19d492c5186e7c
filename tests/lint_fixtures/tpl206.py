import torch

device = torch.device("cuda")
x = torch.randn(3, device=device)
z = torch.zeros(3, 4).to(device)  # expect: TPL206
o = torch.ones(3).cuda()  # expect: TPL206
r = torch.randn(3).to(device)  # near miss: a one-time random draw (same numbers on any device)
for _ in range(10):
    noise = torch.randn(3).to(device)  # expect: TPL206
a = torch.arange(10).to(x.device)  # expect: TPL206
d = torch.zeros(3, device=device)  # near miss: made on the device
t = torch.tensor([1, 2]).to(device)  # near miss: the data comes from the host anyway
h = torch.zeros(3).to(torch.float16)  # near miss: a dtype, not a device
c = torch.zeros(3).to("cpu")  # near miss: stays on the CPU
u = torch.zeros(3).to(something)  # near miss: cannot tell a device from a dtype
