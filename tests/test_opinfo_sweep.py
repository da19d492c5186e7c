"""A bounded part of benchmarks/opinfo_sweep.py: OpInfo's samples on a simulated H100 go
as they go on CUDA (the whole sweep and its numbers: docs/performance.md).

The sample, fixed: every 24th OpInfo operator in name order, and the operators whose CUDA
behaviour this project's issues named (integer histc, half FFTs and pooling, complex nansum,
integer matmul and convolution, meshgrid, tensor_split, unravel_index, _segment_reduce).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("expecttest")  # OpInfo (torch.testing._internal) imports it

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import opinfo_sweep

NAMED = [
    "histc", "fft.rfft", "fft.ihfft", "nn.functional.avg_pool3d", "nansum", "matmul", "mm",
    "nn.functional.conv2d", "meshgrid", "tensor_split", "unravel_index", "_segment_reduce",
]  # fmt: skip
EVERY = 24
#: differences this sample shows, each listed with its reason in docs/sim.md ("What the
#: OpInfo sweep still finds"): CUDA's values check before the dtype switch
KNOWN: tuple[str, ...] = ("_segment_reduce|lengths ",)


def test_sampled_operators_go_as_on_cuda() -> None:
    truth = opinfo_sweep.load_truth(opinfo_sweep.truth_path())
    every = opinfo_sweep.sweep(truth, every=EVERY)
    named = opinfo_sweep.sweep(truth, only=NAMED)
    for key in ("supported", "unsupported", "mixing"):
        a, b = every[key], named[key]
        assert a.total + b.total > 0, key
        unexplained = [d for d in a.differences + b.differences if not d.startswith(KNOWN)]
        assert not unexplained, f"{key}: " + "\n".join(unexplained)


def test_a_sample_meets_cudas_outcome_for_the_same_call() -> None:
    """Samples are matched with CUDA's outcomes by fingerprint, not position: meshgrid's
    sample function iterates over the set {'xy', 'ij'}, whose order follows the process's
    string hashing, so its k-th sample differs between processes."""
    cases = opinfo_sweep.cases
    op = next(o for o in cases.ops() if o.name == "meshgrid")
    samples = cases.samples(op, "float32")[2:6]
    ids = [cases.fingerprint(s) for s in samples]
    assert len(set(ids)) == len(ids)  # indexing="xy" and "ij" are told apart
    outcomes = [{"result": "ok", "id": i, "k": k} for k, i in enumerate(ids)][::-1]
    unmatched = opinfo_sweep.Tally()
    pairs = opinfo_sweep._matched(samples, outcomes, unmatched, "meshgrid")
    assert [want["k"] for _, want in pairs] == [0, 1, 2, 3] and unmatched.total == 0
    outcomes = [{"result": "ok", "id": i} for i in ids[:2]]  # two not in CUDA's data
    pairs = opinfo_sweep._matched(samples, outcomes, unmatched, "meshgrid")
    assert len(pairs) == 2 and unmatched.total == 2
