"""`torchplace info`: the screen, the versioned JSON, and how fast it stays."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

import pytest

import torchplace._devices as tpd
from helpers import run_torchplace
from torchplace._cli import info
from torchplace._devices import probe

GIB = 1024**3

# The JSON contract of schema_version 1; changing a key means bumping the version.
TOP_KEYS = {
    "schema_version",
    "torchplace_version",
    "torch",
    "python",
    "os",
    "cuda_visible_devices",
    "torchplace_device",
    "nvml",
    "devices",
    "distributed",
    "auto",
    "no_gpu",
}
DEVICE_KEYS = {
    "type",
    "index",
    "spec",
    "name",
    "total_memory",
    "free_memory",
    "memory_source",
    "compute_capability",
    "bf16",
    "tf32",
    "multiprocessors",
    "cores",
    "uuid",
    "nvml_index",
    "utilization",
    "temperature",
    "power_draw",
    "power_limit",
    "driver_version",
    "processes",
}
TORCH_KEYS = {"version", "cuda", "hip", "xpu", "debug", "git_version", "platform", "kind", "cudnn"}


def torchplace(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_torchplace(*args, env=env, timeout=120)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHPLACE_DEVICE", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_info_screen() -> None:
    result = torchplace("info")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for label in ("torch", "Python", "OS", "NVIDIA driver", "CUDA_VISIBLE_DEVICES", "distributed"):
        assert label in out
    assert "Devices (memory in GiB)" in out and "cpu" in out
    assert 'device("auto") ->' in out
    assert result.stderr == ""


@pytest.mark.skipif(not tpd.torch_build().cpu_only, reason="this torch build can have a GPU")
def test_info_says_plainly_there_is_no_gpu() -> None:
    out = " ".join(torchplace("info").stdout.split())  # undo rich's line wrapping
    build = tpd.torch_build()
    assert f"No GPU: torch {build.version} is a CPU-only build" in out
    assert "https://pytorch.org/get-started/locally/" in out
    assert 'device("auto") -> cpu' in out


def test_info_json_schema() -> None:
    result = torchplace("info", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["schema_version"] == info.SCHEMA_VERSION == 1
    assert set(report) == TOP_KEYS
    assert set(report["torch"]) == TORCH_KEYS
    assert set(report["nvml"]) == {"driver_version", "cuda_driver_version", "gpus", "error"}
    assert set(report["auto"]) == {"device", "reason", "error"}
    assert set(report["distributed"]) == {"available", "gloo", "nccl", "mpi", "source"}
    assert all(set(d) == DEVICE_KEYS for d in report["devices"])
    cpu = report["devices"][0]
    assert cpu["type"] == "cpu" and cpu["total_memory"] > 0 and cpu["cores"] >= 1
    assert report["python"]["version"] == ".".join(map(str, sys.version_info[:3]))


def test_info_json_matches_torch() -> None:
    import torch
    import torch.distributed as dist

    report = json.loads(torchplace("info", "--json").stdout)
    assert report["torch"]["version"] == torch.__version__
    assert report["torch"]["cuda"] == torch.version.cuda
    assert [d["spec"] for d in report["devices"] if d["type"] == "cuda"] == [
        f"cuda:{i}" for i in range(torch.cuda.device_count())
    ]
    distributed = report["distributed"]  # read from build definitions on CPU-only builds
    assert distributed["available"] == dist.is_available()
    if dist.is_available():
        assert distributed["gloo"] == dist.is_gloo_available()
        assert distributed["nccl"] == dist.is_nccl_available()
        assert distributed["mpi"] == dist.is_mpi_available()
    if not torch.cuda.is_available():
        assert report["auto"]["device"] in ("cpu", "mps:0") or report["auto"]["device"] == "xpu:0"
        assert report["no_gpu"] is not None or report["auto"]["device"] != "cpu"


def test_info_shows_cuda_visible_devices() -> None:
    report = json.loads(torchplace("info", "--json", CUDA_VISIBLE_DEVICES="0,1").stdout)
    assert report["cuda_visible_devices"] == "0,1"
    assert "CUDA_VISIBLE_DEVICES  0,1" in torchplace("info", CUDA_VISIBLE_DEVICES="0,1").stdout


def test_info_survives_a_bad_torchplace_device() -> None:
    result = torchplace("info", "--json", TORCHPLACE_DEVICE="cdua")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["torchplace_device"] == "cdua"
    assert report["auto"]["device"] is None
    assert report["auto"]["error"].startswith("TORCHPLACE_DEVICE='cdua': unknown device type")
    screen = " ".join(torchplace("info", TORCHPLACE_DEVICE="cdua").stdout.split())
    assert (
        "device(\"auto\"): TORCHPLACE_DEVICE='cdua'" in screen and "did you mean 'cuda'?" in screen
    )


_NO_GPU_POSSIBLE = tpd.torch_build().cpu_only or (
    tpd.torch_build().cuda is not None and probe.cuda_driver_loads() is False
)


@pytest.mark.skipif(not _NO_GPU_POSSIBLE, reason="where a GPU may be, torch is imported to ask it")
def test_info_does_not_import_torch_where_no_gpu_can_be() -> None:
    # a CPU-only build, or a CUDA build on a machine without the CUDA driver
    code = (
        "import sys; from torchplace._cli import info; info.collect(); "
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


def test_info_on_a_cuda_build_without_a_driver_does_not_import_torch() -> None:
    # A CUDA torch on a machine without the NVIDIA driver: every fact comes from files.
    code = """
import json, sys
from torchplace._devices import probe
from torchplace._cli import info
probe.torch_version_fields = lambda: {"__version__": "2.14.1+cu130", "cuda": "13.0",
    "hip": None, "xpu": None, "debug": False, "git_version": "abc"}
probe.cuda_driver_loads = lambda: False
probe.pip_cudnn_version = lambda: 92400
probe.torch_compile_definitions = lambda: {"USE_DISTRIBUTED", "USE_C10D_GLOO", "USE_C10D_NCCL"}
report = info.collect()
print(json.dumps({"torch imported": "torch" in sys.modules, **report}))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["torch imported"] is False
    assert (report["torch"]["kind"], report["torch"]["cudnn"]) == ("CUDA 13.0", 92400)
    assert [d["type"] for d in report["devices"]] == ["cpu"]
    assert report["distributed"] == {
        "available": True,
        "gloo": True,
        "nccl": True,
        "mpi": False,
        "source": "build definitions",
    }
    assert report["no_gpu"].startswith("torch 2.14.1+cu130 is a CUDA 13.0 build but sees no GPU")
    assert report["auto"]["device"] == "cpu"


# ------------------------------------------------------------------ fake GPUs, in process


class _Nvml:
    nvmlMemory_v2 = 2

    def __init__(self) -> None:
        self.gpus = [("GPU-a", "NVIDIA H100 80GB HBM3", 70 * GIB), ("GPU-b", "NVIDIA L4", 3 * GIB)]

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        return [g[0] for g in self.gpus].index(uuid)

    def nvmlDeviceGetIndex(self, handle: int) -> int:
        return handle

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self.gpus[handle][1]

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None) -> Any:
        return argparse.Namespace(free=self.gpus[handle][2], total=80 * GIB)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        return argparse.Namespace(gpu=93)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return 71

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return 512_000

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return 700_000

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:
        return [argparse.Namespace(pid=777 + handle, usedGpuMemory=9 * GIB)]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: int) -> list[Any]:
        return []

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        return "python3 [train]"  # brackets would be rich markup if not escaped


def test_info_screen_with_fake_gpus(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    props = [
        argparse.Namespace(
            name=name,
            major=cc[0],
            minor=cc[1],
            total_memory=79 * GIB,
            multi_processor_count=sm,
            uuid=uuid,
        )
        for name, cc, sm, uuid in [
            ("NVIDIA H100 80GB HBM3", (9, 0), 132, "GPU-a"),
            ("NVIDIA L4", (8, 9), 58, "GPU-b"),
        ]
    ]
    build = {"__version__": "2.13.0+cu128", "cuda": "12.8", "hip": None, "xpu": None}
    monkeypatch.setattr(probe, "torch_version_fields", lambda: build)
    monkeypatch.setattr(probe, "cuda_device_count", lambda: 2)
    monkeypatch.setattr(probe, "cuda_properties", lambda i: props[i])
    monkeypatch.setattr(probe, "nvml_open", _Nvml)
    monkeypatch.setattr(info, "_cudnn_version", lambda build: 91002)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")

    report = info.collect()
    assert report["auto"]["device"] == "cuda:0" and report["no_gpu"] is None
    assert list(report["nvml"]["gpus"]) == ["NVIDIA H100 80GB HBM3", "NVIDIA L4"]
    assert info.run(argparse.Namespace(json=False)) == 0
    out = capsys.readouterr().out
    assert "2.13.0+cu128 (CUDA 12.8 build, cuDNN 91002)" in out
    assert "550.54.15 (supports CUDA 12.4); the driver sees 2 GPU(s)" in out
    assert "cuda:0 (GPU 0)" in out and "NVIDIA H100 80GB HBM3" in out
    assert "70.0 / 79.0" in out and "9.0" in out and "132" in out
    assert "93%" in out and "71°C" in out and "512 / 700" in out
    assert "python3 [train]" in out and "9.0" in out
    assert "No GPU" not in out
    assert 'device("auto") -> cuda:0: cuda:0 has the most free memory' in out

    assert info.run(argparse.Namespace(json=True)) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["devices"][1]["processes"] == [
        {"pid": 777, "name": "python3 [train]", "used_memory": 9 * GIB}
    ]


@pytest.mark.parametrize("argv", [["info", "--json"], ["sim", "--list-gpus"]])
def test_a_closed_pipe_ends_the_command_quietly(argv: list[str]) -> None:
    """``torchplace info --json | head`` : the reader is gone before anything is written."""
    read, write = os.pipe()
    os.close(read)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "torchplace", *argv],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert "Traceback" not in r.stderr and "BrokenPipeError" not in r.stderr, r.stderr
    assert r.returncode in (1, 141)  # 141: as a process ended by SIGPIPE (rich's tables: 1)
