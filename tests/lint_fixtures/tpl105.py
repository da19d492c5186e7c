import time

import torch

x = torch.randn(4096, 4096, device="cuda")
start = time.time()
y = x @ x
elapsed = time.time() - start  # expect: TPL105

net = torch.nn.Linear(8, 8).to("cuda")


def forward_timing(inp):
    t0 = time.perf_counter()
    out = net(inp)
    dt = time.perf_counter() - t0  # expect: TPL105
    return out, dt


def synced():
    a = torch.randn(1024, 1024, device="cuda")
    t0 = time.perf_counter()
    b = torch.matmul(a, a)
    torch.cuda.synchronize()
    return b, time.perf_counter() - t0  # near miss: synchronised


def read_back():
    a = torch.randn(1024, 1024, device="cuda")
    t0 = time.perf_counter()
    s = (a @ a).sum().item()
    return s, time.perf_counter() - t0  # near miss: .item() waits for the result


def cpu_only():
    a = torch.randn(1024, 1024)
    t0 = time.time()
    b = a @ a
    return b, time.time() - t0  # near miss: CPU tensors


def data_loading(loader):
    t0 = time.time()
    batch = next(iter(loader))
    return batch, time.time() - t0  # near miss: no device work


def helper_may_sync(model, inp):
    t0 = time.time()
    out = net(inp)
    report(out)
    return time.time() - t0  # near miss: report() may synchronise


def loop_timing():
    t0 = time.time()
    for _ in range(10):
        net(x)
        print(time.time() - t0)  # near miss: read inside the loop
