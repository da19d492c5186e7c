"""torch.multiprocessing.spawn starts one process per GPU, each training with DDP.

GPU (2 GPUs): each spawned process sets up the process group (NCCL), puts the model on
cuda:rank, wraps it in DDP and trains; after the all-reduce every rank holds the same
averaged gradient. spawn re-raises a child's error in the parent (ProcessRaisedException).
Source: PyTorch tutorial "Getting Started with Distributed Data Parallel" (demo_basic,
run_demo with mp.spawn, setup/cleanup); torch/multiprocessing/spawn.py.
"""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def demo_basic(rank: int, world_size: int) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29571"
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = torch.nn.Linear(10, 5).to(rank)
    ddp = DDP(model, device_ids=[rank])
    torch.manual_seed(rank)  # each rank gets its own data
    out = ddp(torch.randn(20, 10).to(rank))
    out.sum().backward()
    assert model.weight.grad.device == torch.device("cuda", rank)
    grads = [torch.zeros_like(model.weight.grad) for _ in range(world_size)]
    dist.all_gather(grads, model.weight.grad)
    assert torch.equal(grads[0], grads[1])  # DDP averaged them
    # Let gloo's worker thread finish with the all-gather before the process group goes:
    # destroying it while that thread still frees the work's tensors can deadlock on the
    # GIL (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp runLoop vs ~ProcessGroupGloo).
    del grads
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    assert world_size == 2
    mp.spawn(demo_basic, args=(world_size,), nprocs=world_size, join=True)

EXPECT = {"gpus": 2, "values": ["real"], "processes": 2}
