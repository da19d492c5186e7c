"""Two processes on the CPU (gloo): DDP through the Runner trains exactly like one process
that sees the same global batches; sharding, all_reduce, checkpoints and shutdown work."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from torchplace.runner import Runner, load, save, unwrap

WORLD = 2
BATCH = 4  # per process; the global batch is 8
EPOCHS = 2
SEED = 11  # the DataLoader's generator seed, which the DistributedSampler takes over


def _dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 5, generator=g)
    y = (x @ torch.arange(1.0, 6.0)).unsqueeze(1) + 0.1 * torch.randn(32, 1, generator=g)
    return TensorDataset(x, y, torch.arange(32))


def _model() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))


def _optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def _worker(rank: int, port: int, out: str) -> None:
    """One process of the job, set up the way torchrun sets up its workers."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(WORLD),
    )
    os.environ.pop("TORCHPLACE_DEVICE", None)
    torch.set_num_threads(1)
    with Runner() as runner:
        assert dist.is_initialized() and dist.get_backend() == "gloo"
        assert (runner.rank, runner.world_size, runner.is_main) == (rank, WORLD, rank == 0)
        assert runner.device == torch.device("cpu"), runner.device
        assert f"process {rank} of {WORLD}" in runner.device_reason

        net = _model()
        model, opt = runner.setup(net, _optimizer(net))
        assert isinstance(model, nn.parallel.DistributedDataParallel)
        data = DataLoader(
            _dataset(),
            batch_size=BATCH,
            shuffle=True,
            generator=torch.Generator().manual_seed(SEED),
        )
        loader = runner.loader(data)
        sampler = loader.sampler
        assert isinstance(sampler, DistributedSampler)
        assert (sampler.rank, sampler.num_replicas, sampler.seed) == (rank, WORLD, SEED)

        seen: list[list[int]] = []
        for _ in range(EPOCHS):
            for x, y, index in loader:
                loss = F.mse_loss(model(x), y)
                runner.backward(loss)
                runner.step(opt)
                seen.append(index.tolist())

        reduced = {
            "mean": runner.all_reduce(float(rank)),
            "sum": runner.all_reduce(rank + 1, op="sum"),
            "max": runner.all_reduce(torch.tensor([rank, -rank]), op="max").tolist(),
            "min": runner.all_reduce(torch.tensor([float(rank)]), op="min").tolist(),
        }
        path = Path(out) / "ckpt.pt"
        save(path, model=model, optimizer=opt, step=len(seen))  # collective: rank 0 writes
        fresh = _model()
        fresh_opt = _optimizer(fresh)
        values = load(path, model=fresh, optimizer=fresh_opt)  # every rank reads
        restored = all(
            torch.equal(a, b)
            for a, b in zip(fresh.state_dict().values(), net.state_dict().values(), strict=True)
        )
        torch.save(
            {
                "weights": unwrap(model).state_dict(),
                "seen": seen,
                "reduced": reduced,
                "restored": restored,
                "values": values,
            },
            Path(out) / f"rank{rank}.pt",
        )
    assert not dist.is_initialized()  # the Runner ended the group it started


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawn(out: Path, timeout: float = 180.0) -> None:
    context = mp.start_processes(
        _worker, args=(_free_port(), str(out)), nprocs=WORLD, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + timeout
    while not context.join(timeout=1.0):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"the {WORLD} DDP workers did not finish within {timeout:.0f} s")


def _single_process_reference() -> tuple[dict[str, torch.Tensor], list[list[int]]]:
    """One process, global batches of WORLD * BATCH: the samples the job's ranks shared."""
    dataset = _dataset()
    model = _model()
    opt = _optimizer(model)
    global_batches = []
    for epoch in range(EPOCHS):
        g = torch.Generator().manual_seed(SEED + epoch)  # what DistributedSampler draws
        order = torch.randperm(len(dataset), generator=g)
        for start in range(0, len(dataset), WORLD * BATCH):
            ids = order[start : start + WORLD * BATCH]
            x, y, _ = dataset[ids]
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            global_batches.append(sorted(ids.tolist()))
    return model.state_dict(), global_batches


@pytest.mark.slow
def test_two_gloo_processes_train_like_one_process_with_the_global_batch(tmp_path: Path) -> None:
    _spawn(tmp_path)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]
    expected, global_batches = _single_process_reference()

    for r in ranks:  # DDP kept the copies identical, and equal to one process's training
        assert r["weights"].keys() == expected.keys()  # no "module." prefix
        for name, tensor in expected.items():
            torch.testing.assert_close(r["weights"][name], tensor, rtol=1e-5, atol=1e-6)

    # each rank saw its own half of every global batch
    for step, batch in enumerate(global_batches):
        mine = [set(r["seen"][step]) for r in ranks]
        assert not mine[0] & mine[1] and sorted(mine[0] | mine[1]) == batch

    for r in ranks:
        assert r["reduced"] == {"mean": 0.5, "sum": 3, "max": [1, 0], "min": [0.0]}
        assert r["restored"] and r["values"] == {"step": len(global_batches)}
