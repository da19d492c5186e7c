"""The conformance harness's real-GPU path (``run.py --gpu-run``), tested on the simulator.

What a real GPU machine has comes through one seam (``run.machine``), patched here; a
"python" that is ``torchplace sim`` stands in for the GPU's interpreter, so the plain-script
path (record.py, the line check, the skips) runs end to end on a CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "conformance"))
import run as conformance

H100 = conformance.Machine(("NVIDIA H100 80GB HBM3",) * 2, ((9, 0),) * 2)
H200 = conformance.Machine(("NVIDIA H200",), ((9, 0),))


@pytest.fixture
def sim_python(tmp_path: Path) -> str:
    """An interpreter that runs its script on two simulated H100s, with real values."""
    path = tmp_path / "python"
    path.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -m torchplace sim --gpus 2 --values real "$@"\n'
    )
    path.chmod(0o755)
    return str(path)


def _case(tmp_path: Path, source: str) -> conformance.Case:
    path = tmp_path / "case.py"
    path.write_text(source)
    return conformance.load(path, source=False)


def test_cases_that_need_two_gpus_or_another_card_are_skipped_with_the_reason() -> None:
    reasons = {c.name: conformance.skip_reason(c, H200) for c in conformance.cases()}
    assert reasons["mp_spawn_ddp"] == "needs 2 GPUs; this machine has 1"
    assert reasons["dtype_bf16_t4"] == "written for T4; this machine has NVIDIA H200"
    assert reasons["ckpt_save_in_place"] is None  # what a GPU does: runs on the GPU too
    assert reasons["h2d_copy_priced_once"] == "checks the simulator itself"
    assert reasons["timing_events"] is None  # written for an H100, holds on an H200
    assert reasons["sdpa_efficient_saved_memory"] is None  # needs sm50+ only
    assert reasons["mismatch_conv"] is None and reasons["torchplace_inside"] is None
    old = conformance.Machine(("Tesla V100-SXM2-16GB",), ((7, 0),))
    sdpa = conformance.cases("sdpa_efficient_saved_memory")[0]
    assert conformance.skip_reason(sdpa, old) is None
    kepler = conformance.Machine(("Tesla K80",), ((3, 7),))
    assert conformance.skip_reason(sdpa, kepler) == (
        "needs compute capability 5.0; this machine's is 3.7"
    )
    assert conformance.skip_reason(conformance.cases("api_properties")[0], kepler) == (
        "written for H100; this machine has Tesla K80"  # a card not in the catalog
    )


def test_a_program_run_by_torchrun_needs_a_gpu_per_process(tmp_path: Path) -> None:
    case = _case(tmp_path, 'EXPECT = {"options": ["--nproc-per-node", "2"]}\n')
    assert case.needs == {"gpus": 2}
    assert conformance.skip_reason(case, H200) == "needs 2 GPUs; this machine has 1"
    assert conformance.skip_reason(case, H100) is None


def test_each_case_sees_as_many_gpus_as_it_needs() -> None:
    assert H100.visible_devices(1) == "0"
    assert conformance.Machine(("a", "b", "c"), ((8, 0),) * 3, ("5", "7", "2")).visible_devices(
        2
    ) == ("5,7")


def test_an_error_raised_inside_torch_is_checked_at_the_cases_line(sim_python: str) -> None:
    # rnn_lengths_on_gpu raises in torch/nn/utils/rnn.py; its line is where the case called it
    for name in ("rnn_lengths_on_gpu", "mismatch_conv"):
        assert conformance.run_on_gpu(conformance.cases(name)[0], sim_python, H100) == []


def test_a_plain_run_that_differs_says_how(tmp_path: Path, sim_python: str) -> None:
    case = _case(
        tmp_path,
        "import torch\n"
        "x = torch.ones(2, device='cuda')\n"
        "y = x + torch.ones(3, 2, device='cuda')  # broadcasts: no error\n"
        'EXPECT = {"exit": 1, "error": {"type": "RuntimeError", "message": "nope", "line": 3}}\n',
    )
    problems = conformance.run_on_gpu(case, sim_python, H100)
    assert problems[:2] == [
        "exit 0, expected 1",
        f"no error raised, expected {case.expect['error']}",
    ]
    record = {"error": {"type": "ValueError", "message": "bad", "line": 2}, "exit": 1}
    assert conformance.check_plain(case, 1, record) == [
        "error type ValueError, expected RuntimeError",
        "error message 'bad' !~ 'nope'",
        "error at line 2, expected line 3",
    ]
    assert conformance.check_plain(case, 1, {}) == ["record.py wrote no record"]


def test_record_keeps_steps_output_and_the_error(tmp_path: Path, sim_python: str) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, torch\n"
        "from helper_module import WIDTH\n"  # sys.path[0] is the script's folder, as for python
        "model = torch.nn.Linear(WIDTH, WIDTH).cuda()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(2):\n"
        "    model(torch.ones(4, WIDTH, device='cuda')).sum().backward()\n"
        "    opt.step()\n"
        "print('argv', sys.argv[1:])\n"
        "torch.ones(1, device='cuda:5')\n"
    )
    (tmp_path / "helper_module.py").write_text("WIDTH = 256\n")
    out = tmp_path / "record.json"
    r = subprocess.run(
        [sim_python, str(conformance.RECORDER), str(script), "--flag"],
        env={**os.environ, conformance.RECORD_ENV: str(out)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr[-2000:]
    assert "CUDA error: invalid device ordinal" in r.stderr  # the script's own traceback
    record = json.loads(out.read_text())
    assert record["stdout"] == "argv ['--flag']\n" and record["exit"] == 1
    assert record["error"]["type"] == "AcceleratorError" and record["error"]["line"] == 9
    assert [s["at"] for s in record["steps"]] == ["step 1", "step 2", "end"]
    step = record["steps"][0]["devices"]["0"]
    weights = (256 * 256 + 256) * 4
    assert step["allocated"] >= 2 * weights  # weights and their gradients
    assert step["reserved"] >= step["max_allocated"] >= step["allocated"]


def test_the_sim_gpu_marker_works_without_the_pip_entry_point() -> None:
    # -p no:torchplace: as when the checkout is only on PYTHONPATH (no entry point)
    test = ["tests/test_runner_gpu.py", "-k", "refused_on_a_simulated_t4"]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:torchplace",
            "-p",
            "no:cacheprovider",
            *test,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent.parent,
    )
    assert "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
