"""benchmarks/pytorch_cuda_tests.py: PyTorch's own CUDA tests on simulated GPUs.

The fixed subset below runs when a PyTorch source checkout is named by the environment
variable TORCHPLACE_PYTORCH_CHECKOUT (its test/test_cuda.py is read from there, never
copied here); CI has none, and the test says so when it skips.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "pytorch_cuda_tests.py"

#: tests of test/test_cuda.py that exercise the bindings (streams, events, graphs, memory)
#: (not graph-safe generator states, which the simulator refuses plainly)
SUBSET = (
    "(test_events or test_stream_event_repr or test_graph_capture_simple or "
    "test_graph_three_successive or test_memory_stats or test_caching_pinned_memory or "
    "test_cudart_register or test_graph_warn_if_has_zero_nodes) and not generators_and_graphs"
)


def _load() -> object:
    spec = importlib.util.spec_from_file_location("pytorch_cuda_tests", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_failures_are_classified_by_what_they_need() -> None:
    bench = _load()
    reason = bench.hardware_reason  # type: ignore[attr-defined]
    assert "separate Python process" in reason("subprocess.check_output([sys.executable])")
    assert "NVRTC" in reason("torch.cuda._compile_kernel(src, 'f')")
    assert "NVML" in reason("pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found")
    assert reason("self.assertEqual(x.grad, y)") is None
    env = bench.environment_reason  # type: ignore[attr-defined]
    assert "host memory" in env("HostMemoryError: ... more than the host could allocate.")
    assert "newer" not in (env("module 'torch._C' has no attribute '_cuda_getDevice'") or "")
    assert env("module 'torch._C' has no attribute '_cuda_getDevice'") is None  # torch names it
    assert "installed torch has not" in env("module 'torch' has no attribute 'no_such_api_x'")


def test_a_fixed_subset_of_pytorchs_test_cuda_passes() -> None:
    checkout = os.environ.get("TORCHPLACE_PYTORCH_CHECKOUT")
    if not checkout or not (Path(checkout) / "test" / "test_cuda.py").is_file():
        pytest.skip(
            "no PyTorch checkout: set TORCHPLACE_PYTORCH_CHECKOUT to a PyTorch source tree "
            "(its test/test_cuda.py) to run PyTorch's own tests on simulated GPUs"
        )
    if importlib.util.find_spec("expecttest") is None:
        pytest.skip("PyTorch's tests import expecttest: pip install expecttest")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), checkout, "--file", "test_cuda.py", "-k", SUBSET, "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (result,) = json.loads(proc.stdout)
    assert result["passed"] >= 8 and result["failed"] == 0, result["gaps"]
