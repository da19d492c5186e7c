"""The Runner's cost: the same training through a hand-written loop and through Runner.

Both sides train the demo's network (``torchplace.demo.DigitsNet``, 6,922 parameters) on the
shipped digits with Adam, the same batches in the same order, one epoch per round. The
hand-written side is what a user writes without torchplace: ``.to(device)`` per batch,
``zero_grad``, ``backward``, ``step``. The Runner side is ``setup``, ``loader``,
``autocast`` (precision "32": a no-op context), ``backward`` and ``step``. Rounds are
interleaved (hand, runner, hand, runner, ...) after one warm-up round each; the median
samples/s of each side and their ratio are printed. Goal: the Runner at >= 0.97x.

On the CPU the clock is this process's CPU time by default (``--timer cpu``), which other
jobs on a shared machine do not inflate, with one intra-op thread (``--threads``) so the
two sides do not differ by OpenMP scheduling noise. On CUDA the clock is wall time,
synchronised on both sides of each round.

Run:
    .venv/bin/python benchmarks/bench_runner.py [--repeat 21] [--device cuda] [--timer wall]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from torchplace import Runner
from torchplace.demo import DigitsNet, split_digits

__all__ = ["hand_written_epoch", "main", "runner_epoch"]


def _loader(
    train: TensorDataset, batch_size: int, seed: int
) -> DataLoader[tuple[torch.Tensor, ...]]:
    return DataLoader(
        train, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )


def hand_written_epoch(
    device: torch.device, train: TensorDataset, batch_size: int
) -> Callable[[], int]:
    """One epoch of the plain PyTorch loop; returns a function that runs it (samples seen)."""
    torch.manual_seed(0)
    model = DigitsNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    batches = _loader(train, batch_size, seed=0)

    def epoch() -> int:
        seen = 0
        for images, labels in batches:
            images, labels = images.to(device), labels.to(device)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            seen += len(labels)
        return seen

    return epoch


def runner_epoch(device: torch.device, train: TensorDataset, batch_size: int) -> Callable[[], int]:
    """One epoch of the same training through torchplace.Runner."""
    runner = Runner(device)
    torch.manual_seed(0)
    net = DigitsNet()
    model, optimizer = runner.setup(net, torch.optim.Adam(net.parameters(), lr=0.01))
    batches = runner.loader(_loader(train, batch_size, seed=0))

    def epoch() -> int:
        seen = 0
        for images, labels in batches:
            with runner.autocast():
                loss = F.cross_entropy(model(images), labels)
            runner.backward(loss)
            runner.step(optimizer)
            seen += len(labels)
        return seen

    return epoch


def _timed(epoch: Callable[[], int], device: torch.device, clock: Callable[[], float]) -> float:
    """Samples per second of one epoch."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = clock()
    seen = epoch()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return seen / (clock() - start)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, ...")
    parser.add_argument("--repeat", type=int, default=21, help="timed rounds per side (21)")
    parser.add_argument("--batch-size", type=int, default=64, help="images per batch (64)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op CPU threads (1)")
    parser.add_argument(
        "--timer", choices=("cpu", "wall"), help="default: cpu on the CPU, wall on a GPU"
    )
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    timer = args.timer or ("cpu" if device.type == "cpu" else "wall")
    if timer == "cpu" and device.type != "cpu":
        parser.error("--timer cpu cannot see GPU work: use --timer wall with a GPU")
    clock = time.process_time if timer == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)
    train, _ = split_digits()
    sides = {
        "hand-written loop": hand_written_epoch(device, train, args.batch_size),
        "torchplace.Runner": runner_epoch(device, train, args.batch_size),
    }
    rates: dict[str, list[float]] = {name: [] for name in sides}
    for epoch in sides.values():  # warm-up: allocator, Adam's state, kernels
        _timed(epoch, device, clock)
    for _ in range(args.repeat):
        for name, epoch in sides.items():
            rates[name].append(_timed(epoch, device, clock))

    steps = -(-len(train) // args.batch_size)
    print(
        f"bench_runner: DigitsNet on {len(train):,} digits, batch {args.batch_size}, {steps} "
        f"steps per round, device {device}, {args.threads} CPU thread(s), {timer} time, "
        f"{args.repeat} interleaved rounds per side"
    )
    print(f"torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}")
    base = statistics.median(rates["hand-written loop"])
    print(f"{'':20}{'median samples/s':>18}{'ms/step':>10}{'ratio':>8}")
    for name, values in rates.items():
        median = statistics.median(values)
        ms_per_step = 1000 * args.batch_size / median
        print(f"{name:20}{median:>18,.0f}{ms_per_step:>10.3f}{median / base:>8.3f}")
    ratio = statistics.median(rates["torchplace.Runner"]) / base
    print(f"goal: Runner >= 0.97x the hand-written loop: {'met' if ratio >= 0.97 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
