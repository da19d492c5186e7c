"""The CPU side of eager PyTorch: what each operation costs the host before its kernel runs.

Eager PyTorch issues one kernel per operation from Python: the interpreter, the
``nn.Module`` call, autograd's bookkeeping, the dispatcher and the CUDA launch all run on
one CPU thread, and the GPU cannot start a kernel the host has not issued yet. A model of
small kernels is therefore bound by the host, whatever the GPU: a faster GPU does not
speed it up.

The model charges every operation that runs a kernel ``host.op_seconds × host.factor``:

- ``host.op_seconds`` is measured (:func:`measure_op_seconds`, run by
  ``benchmarks/timing/measure_host.py``): a tiny model's training step on the CPU, whose
  kernels do next to no work, divided by the number of kernels it runs — the Python,
  module, autograd and dispatcher cost of one eager operation on this project's
  development machine;
- ``host.factor`` turns that into the host time of one *CUDA* operation on a GPU server
  (the kernel launch through the CUDA driver added, the server core's speed): fitted on
  published host-bound runs (``benchmarks/timing/fit.py``).

The step then runs as a queue (:class:`torchplace.cost.StepEstimate`): the host issues
kernels one after another, each starts on the GPU when both the GPU is free and the host
has issued it, and a synchronisation (``.item()``, ``.cpu()``, ``torch.cuda.synchronize``)
makes the host wait for the GPU.

Examples:
    >>> from torchplace.timemodel import host, params
    >>> host.op_host_seconds(params.load()) > 0
    True
"""

from __future__ import annotations

import time

import torch

from torchplace.timemodel.params import Params

__all__ = ["measure_op_seconds", "op_host_seconds"]


def op_host_seconds(params: Params) -> float:
    """CPU seconds charged to one GPU operation."""
    return params["host.op_seconds"] * params["host.factor"]


class _Tiny(torch.nn.Module):
    """A pre-norm transformer block at width 8: every kernel does next to no work."""

    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(8), torch.nn.LayerNorm(8)
        self.qkv, self.proj = torch.nn.Linear(8, 24), torch.nn.Linear(8, 8)
        self.up, self.down = torch.nn.Linear(8, 32), torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm1(x)).split(8, dim=-1)
        att = torch.softmax(q @ k.transpose(-2, -1) * 0.35, dim=-1) @ v
        x = x + self.proj(att)
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))


def measure_op_seconds(*, repeats: int = 7, steps: int = 50) -> tuple[float, int]:
    """CPU seconds per kernel of a tiny eager training step on this machine, and the
    number of kernels a step runs.

    One step is a forward, backward and ``AdamW(foreach=True)`` update of :class:`_Tiny`
    on a ``(2, 4, 8)`` batch; kernels are counted once under a dispatch mode, then
    ``repeats`` runs of ``steps`` steps are timed without it, on one thread. The fastest
    run is kept: on a shared machine other work only ever adds time.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    from torchplace.cost import runs_kernel

    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = _Tiny()
        opt = torch.optim.AdamW(model.parameters(), foreach=True)
        x = torch.randn(2, 4, 8)

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            model(x).square().mean().backward()
            opt.step()

        class _Count(TorchDispatchMode):  # type: ignore[misc, unused-ignore]
            kernels = 0

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                _Count.kernels += runs_kernel(func)
                return func(*args, **(kwargs or {}))

        step()
        with _Count():
            step()
        kernels = _Count.kernels
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(steps):
                step()
            times.append((time.perf_counter() - start) / steps / kernels)
        return min(times), kernels
    finally:
        torch.set_num_threads(threads)
