"""The simulator's cost per training step in instructions and cache misses (valgrind).

``bench_real_values.py`` times a real-values step against the plain one, and on a shared
machine its timings drift by 10-20 %, more than a change to the simulator's per-operation
path moves them; ``sim_bytecodes.py`` counts Python bytecodes and calls, which are not time.
This counts what the CPU does: every instruction one step executes, the instruction fetches
and the data reads and writes that miss the first-level caches (I1, D1), and the accesses
that miss the last-level cache (LL), as valgrind's cachegrind simulates them (``valgrind
--tool=cachegrind --cache-sim=yes``, its caches sized like this machine's). The counts are
the same on every run (``PYTHONHASHSEED=0``; one torch thread), busy machine or not, and
they include what the simulator's Python costs after each kernel has evicted its code and
data from the caches: the kernels execute most of a simulated step's instructions, and the
interpreter and torch's C++ glue between them most of its instruction-cache misses.

Each case runs in its own process under valgrind twice, with ``--warmup`` steps and with
``--warmup`` + ``--steps`` steps: the difference, divided by ``--steps``, is one step's cost
without the start-up (importing torch under valgrind takes minutes). Cases: ``plain`` (the
step on the CPU) and ``sim`` (on a simulated H100 with real values), the models and step of
``bench_real_values.py``. ``--pythonpath DIR`` measures a ``torchplace`` found in ``DIR``
instead (another release's ``src``), for a comparison of two versions' counts.

It is slow: about ten minutes a process, ``--jobs`` of them at a time.

Run:
    .venv/bin/python benchmarks/sim_cachegrind.py [--models transformer] [--steps 4]
        [--warmup 2] [--jobs 2] [--pythonpath DIR] [--cases plain sim]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any

__all__ = ["main", "parse_summary"]

_COUNTERS = {
    "I   refs": "instructions",
    "I1  misses": "I1 misses",
    "D1  misses": "D1 misses",
    "LL misses": "LL misses",
}


def parse_summary(text: str) -> dict[str, int]:
    """The totals of cachegrind's summary (its stderr): instructions, D1 and LL misses."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        for label, name in _COUNTERS.items():
            match = re.search(re.escape(label) + r":\s+([\d,]+)", line)
            if match:
                found[name] = int(match.group(1).replace(",", ""))
    missing = set(_COUNTERS.values()) - set(found)
    if missing:
        raise RuntimeError(f"no {', '.join(sorted(missing))} in cachegrind's output:\n{text}")
    return found


def _child(model_name: str, case: str, steps: int) -> None:
    """Run ``steps`` training steps of ``model_name`` (the measured process)."""
    import torch

    from bench_real_values import MODELS, training_step  # this directory

    torch.set_num_threads(1)
    torch.manual_seed(0)
    context: AbstractContextManager[Any] = nullcontext()
    device = "cpu"
    if case == "sim":
        from torchplace.sim import simulate

        context, device = simulate("H100", values="real"), "cuda"
    with context:
        model, (x, y), loss_fn = MODELS[model_name]()
        step = training_step(model.to(device), x.to(device), y.to(device), loss_fn)
        for _ in range(steps):
            step()


def _measure(model_name: str, case: str, steps: int, pythonpath: str | None) -> dict[str, int]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind", "--tool=cachegrind", "--cache-sim=yes",
            f"--cachegrind-out-file={os.path.join(tmp, 'out')}",
            sys.executable, __file__, "--child", model_name, case, str(steps),
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return parse_summary(done.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["transformer"])
    parser.add_argument("--cases", nargs="+", choices=["plain", "sim"], default=["plain", "sim"])
    parser.add_argument("--steps", type=int, default=4, help="measured steps")
    parser.add_argument("--warmup", type=int, default=2, help="steps in both processes")
    parser.add_argument("--jobs", type=int, default=2, help="valgrind processes at a time")
    parser.add_argument("--pythonpath", help="import torchplace from this directory")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    from bench_real_values import MODELS  # this directory

    unknown = sorted(set(args.models) - set(MODELS))
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    if args.steps < 1 or args.warmup < 0 or args.jobs < 1:
        parser.error("--steps and --jobs must be at least 1, --warmup at least 0")
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt install valgrind)", file=sys.stderr)
        return 2
    runs = [(m, c, n) for m in args.models for c in args.cases
            for n in (args.warmup, args.warmup + args.steps)]  # fmt: skip
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda r: _measure(r[0], r[1], r[2], args.pythonpath), runs))
    counts = dict(zip(runs, results, strict=True))
    where = f", torchplace from {args.pythonpath}" if args.pythonpath else ""
    print(f"per training step, cachegrind (mean of {args.steps} steps after {args.warmup}{where})")
    names = list(_COUNTERS.values())
    print(f"{'model':<16} {'case':<9}" + "".join(f" {name:>14}" for name in names))
    for m in args.models:
        per_step = {}
        for c in args.cases:
            before, after = counts[(m, c, args.warmup)], counts[(m, c, args.warmup + args.steps)]
            per_step[c] = {k: (after[k] - before[k]) / args.steps for k in after}
            print(f"{m:<16} {c:<9}" + "".join(f" {per_step[c][k]:>14,.0f}" for k in names))
        if "plain" in per_step and "sim" in per_step:
            ratios = [per_step["sim"][k] / per_step["plain"][k] for k in names]
            print(f"{m:<16} {'sim/plain':<9}" + "".join(f" {r:>13.2f}×" for r in ratios))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    raise SystemExit(main())
