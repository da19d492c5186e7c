"""The built-in training example: the shipped data, its accuracy, the CLI, and DDP on CPUs."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from importlib import resources

import pytest
import torch

from helpers import run_torchplace
from torchplace import demo


def test_the_shipped_digits_are_the_uci_set_with_its_license() -> None:
    images, labels = demo.load_digits()
    assert images.shape == (1797, 1, 8, 8) and images.dtype == torch.float32
    assert float(images.min()) == 0.0 and float(images.max()) == 1.0
    counts = torch.bincount(labels, minlength=10).tolist()
    assert sum(counts) == 1797 and min(counts) == 174 and max(counts) == 183
    data = resources.files("torchplace") / "data"
    first = gzip.decompress(data.joinpath("digits.csv.gz").read_bytes()).decode().splitlines()[0]
    assert torch.equal(
        images[0].flatten() * 16, torch.tensor([float(v) for v in first.split(",")[:64]])
    )
    license_text = data.joinpath("DIGITS-LICENSE.txt").read_text()
    assert "Alpaydin" in license_text and "CC BY 4.0" in license_text


def test_the_split_is_fixed_and_disjoint() -> None:
    train, test = demo.split_digits()
    again_train, again_test = demo.split_digits()
    assert (len(train), len(test)) == (1437, 360)
    assert torch.equal(test.tensors[0], again_test.tensors[0])
    assert torch.equal(train.tensors[1], again_train.tensors[1])
    rows = {tuple(x.flatten().tolist()) for x in train.tensors[0]}
    assert not any(tuple(x.flatten().tolist()) in rows for x in test.tensors[0][:50])


def test_the_demo_trains_to_at_least_95_percent_and_shows_its_work() -> None:
    lines: list[str] = []
    threads = torch.get_num_threads()
    result = demo.train(device="cpu", log=lines.append)
    assert torch.get_num_threads() == threads  # the demo's one-thread setting is undone
    assert result.test_accuracy >= 0.95, result
    assert result.correct == round(result.test_accuracy * 360)
    assert (result.device, result.world_size, result.precision) == ("cpu", 1, "32")
    assert result.samples_per_s > 0 and result.model_bytes > 0
    shown = "\n".join(lines)
    for expected in ("device     cpu: asked for 'cpu'", "model      on cpu", "batch      on cpu",
                     "memory", "samples/s", "test       accuracy"):  # fmt: skip
        assert expected in shown, shown


def test_bad_options_are_errors() -> None:
    with pytest.raises(ValueError, match=r"epochs=0"):
        demo.train(epochs=0, log=None)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "TORCHPLACE_DEVICE"}


def test_torchplace_demo_command_prints_json() -> None:
    result = run_torchplace("demo", "--epochs", "2", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["epochs"] == 2 and report["world_size"] == 1 and report["train_images"] == 1437


def test_python_m_torchplace_demo_reports_a_precision_the_cpu_cannot_do() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "torchplace.demo", "--device", "cpu", "--precision", "16-mixed"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: precision '16-mixed'")
    assert "'bf16-mixed'" in result.stderr


@pytest.mark.slow
def test_two_cpu_processes_train_the_demo_with_ddp() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchplace",
            "run",
            "--procs",
            "2",
            "-m",
            "torchplace.demo",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)  # rank 0 alone prints
    assert report["world_size"] == 2 and report["device"] == "cpu"
    assert "process 0 of 2" in report["device_reason"]
    assert report["test_accuracy"] >= 0.95, report
