"""The simulator's own work per training step, counted in Python bytecodes and calls.

``bench_real_values.py`` times a real-values step against the plain one; on a shared
machine those timings drift by 10-20 % between runs, more than most changes to the
simulator's per-operation path. This counts instead: every Python bytecode one step
executes (``sys.settrace`` with opcode events), split into the simulator's (files of the
``torchplace`` package), torch's and the rest, for the same models and step as
``bench_real_values.py`` (forward, backward, ``AdamW(foreach=True)``), plainly and on a
simulated H100 with real values. The counts are the same on every run of a given torch
version, so a change's effect on the simulator's work reads as a difference of counts.
Bytecodes are not time, not even Python's: a specialised attribute update (a few ns) counts
like a call into torch (a few hundred ns), and a change that removed 15 % of the count saved
far less time. The counts show where the simulator's Python runs; ``sim_op_costs.py`` times what
each part of it costs (``--cold``: with the caches swept, as after a kernel in a step).

A second table counts calls (``sys.setprofile``): Python functions entered, and C functions
(builtins, torch's C API) called from Python, in all and from the simulator's own code. In a
training step each kernel leaves the CPU's caches cold, and what an operation costs the
simulator then follows its calls more closely than its bytecodes: each is a jump to code
and data the kernel has evicted.

Run:
    .venv/bin/python benchmarks/sim_bytecodes.py [--models cnn transformer] [--steps 2]
        [--top 15]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from types import CodeType, FrameType
from typing import Any

import torch

import torchplace
from bench_real_values import DEFAULT_MODELS, MODELS, training_step  # this directory
from torchplace.sim import simulate

_OURS = os.path.dirname(os.path.abspath(torchplace.__file__))
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))


def count_step(model_name: str, simulated: bool, steps: int) -> Counter[CodeType]:
    """Bytecodes executed by each code object over ``steps`` steps (after 3 warm-up)."""
    counts: Counter[CodeType] = Counter()

    def on_opcode(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            counts[frame.f_code] += 1
        return on_opcode

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return on_opcode

    _run(model_name, simulated, steps, lambda: sys.settrace(on_call), lambda: sys.settrace(None))
    return counts


def count_calls(model_name: str, simulated: bool, steps: int) -> Counter[str]:
    """Over ``steps`` steps (after 3 warm-up): Python functions entered (``"python"``), C
    functions called from Python (``"c"``), and of each those made by torchplace's code
    (``"python torchplace"``, ``"c from torchplace"``)."""
    counts: Counter[str] = Counter()
    ours: dict[CodeType, bool] = {}

    def on_event(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" or event == "c_call":
            kind = "python" if event == "call" else "c"
            counts[kind] += 1
            code = frame.f_code
            mine = ours.get(code)
            if mine is None:
                mine = ours[code] = _owner(code) == "torchplace"
            if mine:
                counts["python torchplace" if kind == "python" else "c from torchplace"] += 1

    _run(
        model_name, simulated, steps, lambda: sys.setprofile(on_event), lambda: sys.setprofile(None)
    )
    return counts


def _run(model_name: str, simulated: bool, steps: int, start: Any, stop: Any) -> None:
    """``steps`` training steps (after 3 warm-up) between ``start()`` and ``stop()``."""
    torch.manual_seed(0)
    context: AbstractContextManager[Any] = (
        simulate("H100", values="real") if simulated else nullcontext()
    )
    with context:
        model, (x, y), loss_fn = MODELS[model_name]()
        if simulated:
            model, x, y = model.cuda(), x.cuda(), y.cuda()
        step = training_step(model, x, y, loss_fn)
        for _ in range(3):
            step()
        start()
        try:
            for _ in range(steps):
                step()
        finally:
            stop()


def _owner(code: CodeType) -> str:
    path = os.path.abspath(code.co_filename)
    if path.startswith(_OURS):
        return "torchplace"
    return "torch" if path.startswith(_TORCH) else "other"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=DEFAULT_MODELS)
    parser.add_argument("--steps", type=int, default=2, help="counted steps (after 3 warm-up)")
    parser.add_argument("--top", type=int, default=0, help="also list the N costliest functions")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    torch.set_num_threads(1)
    print(f"Python bytecodes per training step (torch {torch.__version__})")
    print(f"{'model':<15} {'plain':>9} {'simulated':>10} {'torchplace':>11} {'torch':>9}")
    tops: dict[str, Counter[CodeType]] = {}
    for name in args.models:
        plain = sum(count_step(name, False, args.steps).values()) / args.steps
        counts = count_step(name, True, args.steps)
        by_owner: Counter[str] = Counter()
        for code, n in counts.items():
            by_owner[_owner(code)] += n
        total = sum(by_owner.values()) / args.steps
        ours, theirs = by_owner["torchplace"] / args.steps, by_owner["torch"] / args.steps
        print(f"{name:<15} {plain:>9,.0f} {total:>10,.0f} {ours:>11,.0f} {theirs:>9,.0f}")
        tops[name] = counts
    print("\nCalls per training step: Python functions entered, C functions called from Python")
    print(f"{'model':<15} {'plain':>16} {'simulated':>16} {'torchplace':>16}")
    print(f"{'':<15} {'python':>7} {'C':>8} {'python':>7} {'C':>8} {'python':>7} {'C':>8}")
    for name in args.models:
        plain, sim = (count_calls(name, s, args.steps) for s in (False, True))
        cells = [c[k] / args.steps for c, k in
                 ((plain, "python"), (plain, "c"), (sim, "python"), (sim, "c"),
                  (sim, "python torchplace"), (sim, "c from torchplace"))]  # fmt: skip
        widths = (7, 8) * 3
        print(f"{name:<15}" + "".join(f" {v:>{w},.0f}" for v, w in zip(cells, widths, strict=True)))
    for name, counts in tops.items() if args.top else ():
        print(f"\n{name}: the {args.top} functions that execute the most bytecodes per step")
        for code, n in counts.most_common(args.top):
            where = f"{os.path.relpath(code.co_filename, os.path.dirname(_OURS))}"
            print(f"  {n / args.steps:>9,.0f}  {where}:{code.co_firstlineno} {code.co_name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
