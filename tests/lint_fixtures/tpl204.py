import torch

gpu = torch.randn(4, device="cuda")
host = gpu.to("cpu", non_blocking=True)  # expect: TPL204
host2 = gpu.to(device="cpu", non_blocking=True)  # expect: TPL204
host3 = gpu.to(torch.device("cpu"), non_blocking=True)  # expect: TPL204
back = host.to("cuda", non_blocking=True)  # near miss: towards the device


def synced(t):
    out = t.to("cpu", non_blocking=True)  # near miss: synchronised below
    torch.cuda.current_stream().synchronize()
    return out


def blocking(t):
    return t.to("cpu")  # near miss: blocking
