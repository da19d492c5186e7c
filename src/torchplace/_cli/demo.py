"""Train the built-in digits example (a small CNN, 1,797 images shipped with torchplace) on
the best device through torchplace.Runner, and show the device and why, where the model
and a batch live, memory, throughput and the test accuracy. On several CPU processes with
DDP: torchplace run --procs 2 -m torchplace.demo.
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the demo's options (the same as ``python -m torchplace.demo``)."""
    from torchplace import demo

    demo.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Train and report; returns the exit code."""
    from torchplace import demo

    return demo.run(args)
