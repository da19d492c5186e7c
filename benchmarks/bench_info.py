"""Wall time of ``torchplace info`` against ``python -m torch.utils.collect_env``.

Each command runs in a fresh Python process, as a user would start it; the runs are
interleaved so that machine load hits every command alike, one warm-up run each is
discarded (cold file cache), and the medians and their ratio are printed side by side.
A third row times ``torchplace info`` with torch imported first, which is what it costs
where a GPU may be there to ask torch about. Where none can be (a CPU-only build, or a
CUDA build on a machine whose CUDA driver library does not load), ``info`` reads the
build's files and NVML instead and never imports torch. Run it with each torch build's
Python to compare them (``.venv-cuda/bin/python benchmarks/bench_info.py``).

Usage:
    python benchmarks/bench_info.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

__all__ = ["main"]

_FORCED_TORCH = "import torch, sys; from torchplace.cli import main; sys.exit(main(['info']))"
_COMMANDS = {
    "torchplace info": [sys.executable, "-m", "torchplace", "info"],
    "torchplace info --json": [sys.executable, "-m", "torchplace", "info", "--json"],
    "torchplace info, torch imported first": [sys.executable, "-c", _FORCED_TORCH],
    "python -m torch.utils.collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
}
_BASELINE = "python -m torch.utils.collect_env"


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print medians and ratios to the baseline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command")
    args = parser.parse_args(argv)
    times: dict[str, list[float]] = {name: [] for name in _COMMANDS}
    for command in _COMMANDS.values():
        _wall(command)  # warm-up, discarded
    for _ in range(args.runs):
        for name, command in _COMMANDS.items():
            times[name].append(_wall(command))
    baseline = statistics.median(times[_BASELINE])
    print(f"python {sys.version.split()[0]}, {args.runs} runs each, interleaved, median wall time")
    print(f"{'command':42} {'median s':>9} {'min s':>7} {'max s':>7} {'vs collect_env':>15}")
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"{name:42} {median:9.3f} {min(values):7.3f} {max(values):7.3f} "
            f"{median / baseline:14.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
