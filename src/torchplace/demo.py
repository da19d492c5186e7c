"""The built-in training example: a small CNN learns the UCI handwritten digits.

1,797 grey 8x8 images of the digits 0-9 ship inside the package (``data/digits.csv.gz``,
UCI ML Repository, Alpaydin & Kaynak, CC BY 4.0): nothing is downloaded. A fixed split
keeps 360 images for the test; the rest train a two-convolution network for a few
seconds on the best device, through :class:`torchplace.Runner`. The program shows which
device was chosen and why, where the model and a batch live, the memory they take, the
throughput, and the test accuracy (about 97%).

Run it as ``torchplace demo``, ``python -m torchplace.demo``, or on two CPU processes
with DDP: ``torchplace run --procs 2 -m torchplace.demo``.

Examples:
    >>> from torchplace.demo import load_digits
    >>> images, labels = load_digits()
    >>> tuple(images.shape), tuple(labels.shape), labels[:10].tolist()
    ((1797, 1, 8, 8), (1797,), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from torchplace.memory import allocator_stats, format_bytes, model_memory
from torchplace.move import where
from torchplace.runner import PRECISIONS, Runner

__all__ = [
    "DemoResult",
    "DigitsNet",
    "add_arguments",
    "load_digits",
    "main",
    "run",
    "split_digits",
    "train",
]

_TEST_IMAGES = 360
_SPLIT_SEED = 0


def load_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The 1,797 digits shipped with torchplace: images in [0, 1] and their labels.

    Returns:
        ``images`` (float32, shape ``(1797, 1, 8, 8)``) and ``labels`` (int64, 0-9).
    """
    source = resources.files("torchplace") / "data" / "digits.csv.gz"
    with source.open("rb") as raw, gzip.open(raw, "rt", newline="") as text:
        rows = [[int(v) for v in row] for row in csv.reader(text)]
    table = torch.tensor(rows, dtype=torch.int64)
    images = table[:, :64].to(torch.float32).div_(16.0).view(-1, 1, 8, 8)  # pixels are 0..16
    return images, table[:, 64].clone()


def split_digits() -> tuple[TensorDataset, TensorDataset]:
    """The fixed split: 1,437 training and 360 test images (a seeded permutation)."""
    images, labels = load_digits()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(_SPLIT_SEED))
    test, train = order[:_TEST_IMAGES], order[_TEST_IMAGES:]
    return TensorDataset(images[train], labels[train]), TensorDataset(images[test], labels[test])


class DigitsNet(nn.Module):
    """Two 3x3 convolutions with max pooling, then a linear layer: 6,922 parameters.

    Examples:
        >>> import torch
        >>> DigitsNet()(torch.zeros(5, 1, 8, 8)).shape
        torch.Size([5, 10])
    """

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 4x4 -> 2x2
        )
        self.classify = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classify(self.features(x).flatten(1))


@dataclass(frozen=True)
class DemoResult:
    """What a demo run did and how well.

    Attributes:
        device: this process's device, e.g. ``"cuda:0"``.
        device_reason: why that device.
        precision: the training precision.
        world_size: how many processes trained together.
        epochs: passes over the training images.
        batch_size: images per batch per process.
        train_images: images in the training set.
        test_images: images in the test set.
        seconds: training time, all epochs.
        samples_per_s: training images per second, all processes together.
        final_loss: mean training loss of the last epoch.
        correct: test images classified correctly.
        test_accuracy: ``correct / test_images``.
        model_bytes: parameters, gradients, buffers and optimizer state, in bytes.
    """

    device: str
    device_reason: str
    precision: str
    world_size: int
    epochs: int
    batch_size: int
    train_images: int
    test_images: int
    seconds: float
    samples_per_s: float
    final_loss: float
    correct: int
    test_accuracy: float
    model_bytes: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        return asdict(self)


def train(
    *,
    device: str | int | torch.device = "auto",
    precision: str = "32",
    epochs: int = 10,
    batch_size: int = 64,
    lr: float = 0.01,
    seed: int = 0,
    log: Callable[[str], None] | None = print,
) -> DemoResult:
    """Train :class:`DigitsNet` on the digits and test it, printing progress on rank 0.

    Args:
        device: the device spec for :class:`torchplace.Runner` (``"auto"``, ``"cpu"``...).
        precision: ``"32"``, ``"bf16-mixed"`` or ``"16-mixed"``.
        epochs: passes over the 1,437 training images.
        batch_size: images per batch in each process.
        lr: Adam's learning rate.
        seed: seeds the weights and the shuffling.
        log: where the lines for people go (rank 0 only); ``None`` for silence.

    Returns:
        The :class:`DemoResult` (the same on every process).

    Raises:
        ValueError: an argument out of range, or a device/precision that cannot be used.
    """
    if epochs < 1 or batch_size < 1 or lr <= 0:
        raise ValueError(
            f"epochs and batch_size must be at least 1 and lr above 0, got epochs={epochs}, "
            f"batch_size={batch_size}, lr={lr}."
        )
    train_set, test_set = split_digits()
    with Runner(device, precision=precision) as runner:
        say = log if (log is not None and runner.is_main) else _silent
        with _cpu_threads(runner.device):
            return _train(runner, train_set, test_set, say, epochs, batch_size, lr, seed)


def _train(
    runner: Runner,
    train_set: TensorDataset,
    test_set: TensorDataset,
    say: Callable[[str], None],
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
) -> DemoResult:
    n_train, n_test = len(train_set), len(test_set)
    say(
        f"torchplace demo: a small CNN learns the UCI handwritten digits "
        f"({n_train:,} training and {n_test} test images, 8x8)"
    )
    say(f"device     {runner.device}: {runner.device_reason}")
    say(
        f"job        {runner.world_size} process{'es' if runner.world_size > 1 else ''}, "
        f"precision {runner.precision}, batch {batch_size} per process, "
        f"{epochs} epoch{'s' if epochs != 1 else ''}"
    )
    torch.manual_seed(seed)  # the same initial weights in every process
    net = DigitsNet()
    model, optimizer = runner.setup(net, torch.optim.Adam(net.parameters(), lr=lr))
    batches = runner.loader(
        DataLoader(
            train_set,
            batch_size=batch_size,
            shuffle=True,
            generator=torch.Generator().manual_seed(seed),
        )
    )
    say(f"model      {_placement(where(net))}")

    seconds, samples_total, loss_mean, memory, step = 0.0, 0, float("nan"), 0, 0
    for epoch in range(epochs):
        model.train()
        start = time.perf_counter()
        loss_sum = torch.zeros((), device=runner.device)
        samples = 0
        for images, labels in batches:
            with runner.autocast():
                loss = F.cross_entropy(model(images), labels)
            runner.backward(loss)
            if step == 1:  # gradients exist now, Adam's state since the first step
                say(f"batch      {_placement(where((images, labels)))}")
                memory = _show_memory(runner, net, optimizer, say)
            runner.step(optimizer)
            step += 1
            loss_sum += loss.detach() * len(labels)
            samples += len(labels)
        # the reductions read the loss back from the device, so the clock sees finished work
        loss_mean = runner.all_reduce(loss_sum, op="sum").item()
        epoch_samples = runner.all_reduce(samples, op="sum")
        loss_mean /= epoch_samples
        elapsed = runner.all_reduce(time.perf_counter() - start, op="max")
        seconds += elapsed
        samples_total += int(epoch_samples)
        say(
            f"epoch {epoch + 1:>2}/{epochs}  loss {loss_mean:.3f}  "
            f"{epoch_samples / elapsed:,.0f} samples/s"
        )

    correct = _count_correct(runner, model, test_set)
    accuracy = correct / n_test
    say(
        f"test       accuracy {accuracy:.1%} ({correct}/{n_test}); trained in {seconds:.2f} s, "
        f"{samples_total / seconds:,.0f} samples/s"
    )
    return DemoResult(
        device=str(runner.device),
        device_reason=runner.device_reason,
        precision=runner.precision,
        world_size=runner.world_size,
        epochs=epochs,
        batch_size=batch_size,
        train_images=n_train,
        test_images=n_test,
        seconds=seconds,
        samples_per_s=samples_total / seconds,
        final_loss=loss_mean,
        correct=correct,
        test_accuracy=accuracy,
        model_bytes=memory,
    )


def _count_correct(runner: Runner, model: nn.Module, test_set: TensorDataset) -> int:
    """Every process tests the whole (small) test set: the models are identical."""
    images, labels = runner.to(test_set.tensors)
    model.eval()
    with torch.no_grad(), runner.autocast():
        predicted = model(images).argmax(dim=1)
    return int((predicted == labels).sum().item())


def _placement(placement: Any) -> str:
    devices = ", ".join(placement.devices)
    tensors = len(placement.device_of)
    size = format_bytes(placement.total_bytes)
    state = "mixed devices!" if placement.mixed else "all on one device"
    return f"on {devices}: {tensors} tensors, {size} ({state})"


def _show_memory(
    runner: Runner, model: nn.Module, optimizer: torch.optim.Optimizer, say: Callable[[str], None]
) -> int:
    m = model_memory(model, optimizer)
    say(
        f"memory     {format_bytes(m.total)}: parameters {format_bytes(m.parameters)}, "
        f"gradients {format_bytes(m.gradients)}, Adam state {format_bytes(m.optimizer_state)}"
    )
    stats = allocator_stats(runner.device)
    if stats is not None and stats.peak_allocated is not None:
        say(
            f"allocator  {runner.device}: peak {format_bytes(stats.peak_allocated)} allocated, "
            f"{format_bytes(stats.reserved or 0)} reserved (the CUDA context is extra)"
        )
    return m.total


@contextlib.contextmanager
def _cpu_threads(device: torch.device) -> Iterator[None]:
    """One intra-op thread on the CPU: this network is so small that OpenMP's hand-offs
    cost more than they save (several times slower on a busy 2-core machine)."""
    if device.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _silent(_: str) -> None:
    return None


# --- the program ------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options (shared by ``torchplace demo`` and ``python -m torchplace.demo``)."""
    parser.add_argument(
        "--device", default="auto", help="auto (default), cpu, cuda, cuda:1, mps, ..."
    )
    parser.add_argument(
        "--precision", default="32", choices=PRECISIONS, help="training precision (default 32)"
    )
    parser.add_argument("--epochs", type=int, default=10, help="passes over the data (10)")
    parser.add_argument(
        "--batch-size", type=int, default=64, help="images per batch per process (64)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of weights and shuffling (0)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    """Train with the parsed options; print JSON on rank 0 with ``--json``. Returns 0."""
    result = train(
        device=args.device,
        precision=args.precision,
        epochs=args.epochs,
        batch_size=args.batch_size,
        seed=args.seed,
        log=None if args.json else print,
    )
    if args.json and _is_rank0():
        print(json.dumps(result.to_dict(), indent=2))
    return 0


def _is_rank0() -> bool:
    return os.environ.get("RANK", "0") == "0"  # set by torchrun for each process


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m torchplace.demo [options]``: train, print, return the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m torchplace.demo", description=__doc__.split("\n\n")[0]
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
