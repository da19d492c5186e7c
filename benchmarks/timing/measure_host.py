"""Measure the CPU time of one eager PyTorch operation on this machine.

The step-time model charges the host ``host.op_seconds × host.factor`` per GPU operation
(torchplace/timemodel/host.py): ``op_seconds`` is this measurement (a tiny transformer
block's training step on the CPU, whose kernels do next to no work, divided by the kernels
it runs: Python, ``nn.Module``, autograd and the dispatcher), ``factor`` is fitted on
published host-bound runs by ``benchmarks/timing/fit.py``. The product is what prices a
step, so after ``--write`` run the fit again.

Run:
    .venv/bin/python benchmarks/timing/measure_host.py           # print it
    .venv/bin/python benchmarks/timing/measure_host.py --write   # and store it
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
_DATA = ROOT / "src" / "torchplace" / "data" / "timemodel.toml"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} CPUs"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store it as host.op_seconds")
    parser.add_argument(
        "--repeats", type=int, default=9, help="timed runs, the fastest kept (default 9)"
    )
    args = parser.parse_args(argv)
    import torch

    from torchplace.timemodel.host import measure_op_seconds

    seconds, kernels = measure_op_seconds(repeats=args.repeats)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cpu = _cpu_name()
    print(
        f"torch {torch.__version__}, {cpu}, load average {load:.2f}: {kernels} kernels a step, "
        f"{seconds * 1e6:.2f} µs per operation (fastest of {args.repeats} runs)"
    )
    if args.write:
        today = datetime.date.today().isoformat()
        source = (
            f"measured: benchmarks/timing/measure_host.py ({today}, torch {torch.__version__}, "
            f"{cpu}, load average {load:.1f}; {kernels} kernels a step)"
        )
        text = _DATA.read_text()
        line = f'op_seconds = {{ value = {seconds:.3g}, fitted = false, source = "{source}" }}'
        pattern = r'^op_seconds = \{ value = [^,]+, fitted = false, source = "[^"]*" \}'
        text, n = re.subn(pattern, line, text, flags=re.M)
        if n != 1:
            print(f"error: host.op_seconds not found in {_DATA}", file=sys.stderr)
            return 1
        _DATA.write_text(text)
        print(f"written to {_DATA.relative_to(ROOT)}; now run benchmarks/timing/fit.py --write")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
