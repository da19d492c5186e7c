"""Tests no one here wrote: skorch's GPU-only tests, run with ``pytest --sim-gpu H100``.

skorch's wheel ships its test suite; without a GPU these tests skip ("no cuda device").
One pytest process runs a selection of them on a simulated H100 (as
``benchmarks/external_gpu_tests.py`` does for the whole of ``test_net`` and ``test_utils``),
and each test here checks one outcome. A test that fails because of a simulator bug gets a
conformance case that reproduces the bug (tests/conformance/cases), and stays here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("skorch", reason="skorch is a dev dependency: pip install -e '.[dev]'")

_SPEC = importlib.util.find_spec("skorch")
_SITE = Path(_SPEC.origin or "").parent.parent if _SPEC else Path()

PASSING = [
    "test_net.py::TestNeuralNet::test_forward_device_gpu",
    "test_net.py::TestNeuralNet::test_binary_classification_with_cuda",
    "test_net.py::TestNeuralNet::test_device_torch_device[cuda]",
    "test_net.py::TestNeuralNet::test_criterion_params_on_device[cuda]",
    "test_net.py::TestNeuralNet::test_moving_custom_modules_to_device",
    "test_net.py::TestNeuralNet::test_optimizer_initialized_after_module_moved_to_device",
    "test_net.py::TestNeuralNet::test_save_load_state_cuda_intercompatibility",
    "test_net.py::TestNeuralNet::test_save_params_cuda_load_params_cpu_when_cuda_available[False]",
    "test_net.py::TestNeuralNet::test_pickle_save_and_load_mixed_devices[cuda-False-cpu-True]",
    "test_net.py::TestNetSparseInput::test_fit_sparse_csr_learns_cuda",
    "test_utils.py::TestToDevice::test_check_device_torch_tensor[cuda-cpu]",
    "test_utils.py::TestToDevice::test_check_device_packed_padded_sequence[cpu-cuda]",
    "test_utils.py::TestToDevice::test_nested_data[cuda-cuda]",
    # these four failed until the simulator bugs they found were fixed (the conformance
    # cases legacy_tensor_types, cuda_device_context, numpy_from_tensors and
    # rnn_pack_padded_sequence reproduce them)
    "test_net.py::TestNeuralNet::test_use_cuda_on_model",
    "test_net.py::TestNeuralNet::test_pickle_save_and_load_mixed_devices[cuda-True-cuda-False]",
    "test_utils.py::TestToDevice::test_check_device_dict_torch_tensor[cuda-cuda]",
    "test_utils.py::TestToTensor::test_device_setting_cuda",
]


def _run(args: list[str], work: Path) -> dict[str, str]:
    """Run skorch's tests in ``work`` with --sim-gpu H100: test id -> PASSED/FAILED/..."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    cmd = [sys.executable, "-m", "pytest", *args, "--sim-gpu", "H100", "-rA", "-p"]
    cmd += ["no:cacheprovider", "--continue-on-collection-errors", "-o", "addopts="]
    run = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    found: dict[str, str] = {}
    for line in run.stdout.splitlines():
        m = re.match(r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) \S*skorch/tests/(\S+)", line)
        if m:
            found.setdefault(m.group(2), m.group(1))
    assert found, run.stdout[-3000:] + run.stderr[-3000:]
    return {**found, "_stdout": run.stdout}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The selection, run once (a test named by id whose class does not collect would stop
    pytest with "found no collectors": TestToTensor runs apart, selected with -k)."""
    work = tmp_path_factory.mktemp("skorch")
    (work / "skorch" / "tests").mkdir(parents=True)  # skorch's tests write here
    tests = _SITE / "skorch" / "tests"
    by_id = [t for t in PASSING if "::TestToTensor::" not in t]
    found = _run([str(tests / t) for t in by_id], work)
    apart = _run([str(tests / "test_utils.py"), "-k", "TestToTensor"], work)
    return {**apart, **found, "_stdout": found["_stdout"] + apart["_stdout"]}


@pytest.mark.slow
@pytest.mark.parametrize("test", PASSING)
def test_skorch_gpu_test_passes_on_a_simulated_h100(outcomes: dict[str, str], test: str) -> None:
    assert outcomes.get(test) == "PASSED", _excerpt(outcomes, test)


def _excerpt(outcomes: dict[str, str], test: str) -> str:
    name = test.split("::")[-1]
    out = outcomes["_stdout"]
    i = out.find(name)
    return f"{test}: {outcomes.get(test)}\n" + (out[max(0, i - 200) : i + 2500] if i >= 0 else "")
