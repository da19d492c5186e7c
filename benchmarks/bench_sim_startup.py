"""Start-up cost of ``torchplace sim``: an empty script against ``import torch``.

The parent process reads options and prints the report without importing torch; the child
imports torch and enters the simulation. The goal (issue 8 §3): at most ``import torch``
plus 0.5 s. Runs are interleaved (sim, import, sim, import, ...) so load on the machine
hits both alike; medians are printed.

Run: .venv/bin/python benchmarks/bench_sim_startup.py [--runs 9]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.py"
        empty.write_text("")
        sim = [sys.executable, "-m", "torchplace", "sim", "--json", str(empty)]
        plain = [sys.executable, "-c", "import torch"]
        timed(plain)  # warm the file cache
        sims, imports = [], []
        for _ in range(args.runs):
            sims.append(timed(sim))
            imports.append(timed(plain))
    s, i = statistics.median(sims), statistics.median(imports)
    print(f"runs: {args.runs} (interleaved)")
    print(f"python -c 'import torch'        median {i:.2f} s")
    print(f"torchplace sim <empty script>    median {s:.2f} s")
    print(f"difference                       {s - i:+.2f} s (goal: at most +0.50 s)")


if __name__ == "__main__":
    main()
