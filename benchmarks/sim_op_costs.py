"""What the simulator adds to one operation, in microseconds, and which of its parts.

``bench_real_values.py`` times whole training steps, whose timings on a shared machine
drift by 10-20 % between processes; ``sim_bytecodes.py`` counts the simulator's Python
bytecodes, which are the same on every run but weigh a specialised attribute update (a few
nanoseconds) like a call into torch (a few hundred). This times single operations in a hot
loop, in µs per call: the best of ``--repeat`` rounds, each round timing ``--number`` calls of
every operation in every column in turn (so a burst of other work on the machine spoils one
round of each cell, not all rounds of one):

- ``plain``: the operation on CPU tensors;
- ``modes``: the same under a ``TorchFunctionMode`` and a ``TorchDispatchMode`` that only call
  the function (the floor of a simulator built on torch's two Python modes);
- ``sim``: on a simulated H100 with real values (``simulate("H100", values="real")``);
- ``-cost``, ``-trace``, ``-allocator``: the simulated operation with the cost model, the
  allocation trace or the caching-allocator model replaced by one that does nothing (the
  difference to ``sim`` is that part's share; the three are switched off through the
  simulator's internals, for this measurement only).

The operations are those a training step is made of: a view (half of a transformer step's
aten calls), an add that makes a new tensor (an allocation and a free), an in-place add, a
64 × 64 matrix product, ``.item()`` of a host tensor (AdamW reads its step counts so) and
reading ``.grad``.

A hot loop keeps the simulator's code and data in the CPU's caches, and a training step
does not: each kernel sweeps them, and the Python that follows runs slower (timers put
around ``op_cost`` in a transformer step, a throwaway measurement, found it two to four
times slower than in a loop). ``--cold [MIB]`` times each call alone after a copy of MIB MiB
(2 by default: twice this machine's per-core L2; the same throwaway timers found ``op_cost``
about as slow after it as in the step) has swept the caches: closer to what a part costs
in a step. A much larger sweep (32 MiB) leaves torch's
own code colder than any step does (a plain view then takes 58 µs).

Run:
    .venv/bin/python benchmarks/sim_op_costs.py [--number 2000] [--repeat 7] [--cold [MIB]]
"""

from __future__ import annotations

import argparse
import math
import time
import timeit
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from bench_real_values import _EmptyModes  # this directory
from torchplace.sim import simulate
from torchplace.sim.emulation._modes import SimDispatchMode

Case = Callable[[], Any]


def cases(device: str) -> dict[str, Case]:
    """The timed operations, on tensors made on ``device``."""
    a, b = torch.randn(4, 4, device=device), torch.randn(4, 4, device=device)
    m = torch.randn(64, 64, device=device)
    w = torch.zeros(4, 4, device=device, requires_grad=True)
    w.grad = torch.zeros(4, 4, device=device)
    step = torch.tensor(3.0)  # on the host, as AdamW keeps its step counts
    return {
        "view": lambda: a.view(16),
        "add (new tensor)": lambda: torch.add(a, b),
        "add_ (in place)": lambda: a.add_(b),
        "mm 64x64": lambda: torch.mm(m, m),
        "host .item()": lambda: step.item(),
        ".grad": lambda: w.grad,
    }


def per_call(case: Case, number: int, sweep: Callable[[], None] | None = None) -> float:
    """µs per call of ``number`` calls (after one untimed call); with ``sweep``, each call
    is timed alone after ``sweep()`` has emptied the CPU caches."""
    case()
    if sweep is None:
        return timeit.timeit(case, number=number) / number * 1e6
    total = 0.0
    for _ in range(number):
        sweep()
        start = time.perf_counter()
        case()
        total += time.perf_counter() - start
    return total / number * 1e6


def cache_sweep(nbytes: int) -> Callable[[], None]:
    """A copy of ``nbytes``, in plain C: no torch call, so none of the simulator's code runs
    and warms the caches again."""
    src, dst = bytearray(b"x" * nbytes), bytearray(nbytes)

    def sweep() -> None:
        dst[:] = src

    return sweep


class _NullTrace:
    """The allocation trace, recording nothing (everything else read from the real one)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def alloc(self, *args: Any) -> int:
        return -1

    def free(self, *args: Any) -> None:
        pass

    def op(self, *args: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _NullAllocator:
    """The caching-allocator model, modelling nothing: each malloc gets a new handle."""

    def __init__(self, real: Any) -> None:
        self._real, self._next = real, 1 << 62

    def malloc(self, nbytes: int, stream: int = 0) -> int:
        self._next += 1
        return self._next

    def free(self, handle: int) -> None:
        if handle < 1 << 62:  # made before the switch: the real model's
            self._real.free(handle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@contextmanager
def without(part: str) -> Iterator[None]:
    """Inside a simulation: ``part`` of the simulator replaced by a no-op. Tensors made
    inside must die inside (the timed operations' outputs do): the allocator model could not
    free a block the no-op one handed out."""
    mode = next(m for m in _get_current_dispatch_mode_stack() if isinstance(m, SimDispatchMode))
    state, device = mode.state, mode.state.devices[0]
    saved = mode.on_op, state.trace, device.allocator
    if part == "cost":
        mode.on_op = None
    elif part == "trace":
        state.trace = _NullTrace(state.trace)
    elif part == "allocator":
        device.allocator = _NullAllocator(device.allocator)
    else:
        raise ValueError(f"unknown part {part!r}: cost, trace or allocator")
    try:
        yield
    finally:
        state.sync()  # frees of blocks made while switched off, to the allocator that made them
        mode.on_op, state.trace, device.allocator = saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per timing")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (the best is kept)")
    parser.add_argument(
        "--cold", type=int, nargs="?", const=2, default=0, metavar="MIB",
        help="copy MIB MiB (2 if not given) before each timed call, sweeping the CPU caches",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.number < 1 or args.repeat < 1 or args.cold < 0:
        parser.error("--number and --repeat must be at least 1, --cold at least 0")
    torch.set_num_threads(1)
    parts = ("cost", "trace", "allocator")
    plain = cases("cpu")
    rows: dict[str, dict[str, float]] = {name: {} for name in plain}

    sweep = cache_sweep(args.cold << 20) if args.cold else None

    def keep(name: str, column: str, case: Case) -> None:
        rows[name][column] = min(
            rows[name].get(column, math.inf), per_call(case, args.number, sweep)
        )

    for _ in range(args.repeat):
        for name, case in plain.items():
            keep(name, "plain", case)
            with _EmptyModes():
                keep(name, "modes", case)
        with simulate("H100", values="real"):
            for name, case in cases("cuda").items():
                keep(name, "sim", case)
                for part in parts:
                    with without(part):
                        keep(name, f"-{part}", case)
    print(
        f"µs per call, best of {args.repeat} rounds of {args.number} calls"
        f"{', caches swept before each' if args.cold else ''} (torch {torch.__version__}, 1 thread)"
    )
    columns = ("plain", "modes", "sim", *(f"-{p}" for p in parts))
    print(f"{'operation':<18}" + "".join(f"{c:>11}" for c in columns) + f"{'sim - plain':>13}")
    for name, row in rows.items():
        cells = "".join(f"{row[c]:>11.1f}" for c in columns)
        print(f"{name:<18}{cells}{row['sim'] - row['plain']:>13.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
