import time

import torch


def measure(fn, *args, steps=20):
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        fn(*args)
    elapsed = time.perf_counter() - start  # expect: TPL105
    return elapsed / steps


def measure_right(fn, *args, steps=20):
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps  # near miss: synchronised


def cuda_sync():
    torch.cuda.synchronize()


def measure_with_helper(fn, *args):
    cuda_sync()
    start = time.perf_counter()
    fn(*args)
    cuda_sync()
    return time.perf_counter() - start  # near miss: a helper that synchronises


def measure_host(fn, *args):
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start  # near miss: nothing says fn runs on a GPU
