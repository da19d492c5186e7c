"""The simulator's own work per training step, counted in Python bytecodes.

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
        sys.settrace(on_call)
        try:
            for _ in range(steps):
                step()
        finally:
            sys.settrace(None)
    return counts


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
    for name, counts in tops.items() if args.top else ():
        print(f"\n{name}: the {args.top} functions that execute the most bytecodes per step")
        for code, n in counts.most_common(args.top):
            where = f"{os.path.relpath(code.co_filename, os.path.dirname(_OURS))}"
            print(f"  {n / args.steps:>9,.0f}  {where}:{code.co_firstlineno} {code.co_name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
