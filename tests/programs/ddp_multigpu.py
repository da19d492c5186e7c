"""Pattern of the PyTorch DDP tutorial series, multigpu.py (pytorch/examples
distributed/ddp-tutorial-series); written for this corpus.

``mp.spawn(main, args=(world_size, ...), nprocs=world_size)`` with ``world_size =
torch.cuda.device_count()``; each process sets MASTER_ADDR/PORT, calls
``torch.cuda.set_device(rank)`` and ``init_process_group("nccl", rank, world_size)``; the
model is wrapped in ``DDP(model, device_ids=[gpu_id])``; a DataLoader with
``DistributedSampler`` and ``sampler.set_epoch(epoch)``; rank 0 saves
``model.module.state_dict()``.
GPU (2 GPUs): both processes train, each on its own cuda:rank, and exit 0.
"""

import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def ddp_setup(rank: int, world_size: int) -> None:
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"
    torch.cuda.set_device(rank)
    dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)


def main(rank: int, world_size: int, total_epochs: int, save_dir: str) -> None:
    ddp_setup(rank, world_size)
    torch.manual_seed(0)
    dataset = TensorDataset(torch.rand(256, 20), torch.rand(256, 1))
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, pin_memory=True, shuffle=False, sampler=sampler)
    model = DDP(torch.nn.Linear(20, 1).to(rank), device_ids=[rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    for epoch in range(total_epochs):
        sampler.set_epoch(epoch)
        for source, targets in loader:
            source, targets = source.to(rank), targets.to(rank)
            optimizer.zero_grad()
            loss = F.mse_loss(model(source), targets)
            loss.backward()
            optimizer.step()
        if rank == 0:
            torch.save(model.module.state_dict(), os.path.join(save_dir, "checkpoint.pt"))
            print(f"Epoch {epoch} | loss {loss.item():.4f} | checkpoint saved")
    assert model.module.weight.device == torch.device("cuda", rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    assert world_size == 2, world_size
    mp.spawn(main, args=(world_size, 3, tempfile.mkdtemp()), nprocs=world_size)

EXPECT = {"gpus": 2, "values": ["real"], "processes": 2}
