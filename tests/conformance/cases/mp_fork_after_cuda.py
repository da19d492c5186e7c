"""A process forked after the parent used CUDA cannot use CUDA.

GPU: the child raises RuntimeError "Cannot re-initialize CUDA in forked subprocess. To use
CUDA with multiprocessing, you must use the 'spawn' start method" and exits with code 1;
torch.cuda._is_in_bad_fork() is True there; a child forked before any CUDA use may use it.
Source: torch/cuda/__init__.py (_lazy_init, _is_in_bad_fork); PyTorch docs
"Multiprocessing best practices" (CUDA in subprocesses).
"""

import multiprocessing as mp

import torch


def use_cuda(queue: "mp.Queue[str]") -> None:
    queue.put(f"bad fork: {torch.cuda._is_in_bad_fork()}")
    try:
        torch.ones(1, device="cuda")
    except RuntimeError as e:
        queue.put(str(e))
        raise SystemExit(1) from None
    queue.put("ok")


if __name__ == "__main__":
    fork = mp.get_context("fork")
    q = fork.Queue()
    early = fork.Process(target=use_cuda, args=(q,))  # before the parent uses CUDA
    early.start()
    early.join()
    assert early.exitcode == 0 and [q.get(), q.get()] == ["bad fork: False", "ok"]
    x = torch.ones(1, device="cuda")  # the parent uses CUDA
    late = fork.Process(target=use_cuda, args=(q,))
    late.start()
    late.join()
    assert late.exitcode == 1
    assert q.get() == "bad fork: True"
    assert q.get().startswith("Cannot re-initialize CUDA in forked subprocess")

EXPECT = {}
