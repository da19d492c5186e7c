"""torchplace._devices: discovery, the spec parser, auto selection and every error.

CUDA, MPS, XPU and NVML are exercised on a CPU machine by patching the seams in
``torchplace._devices.probe`` (one small function per hardware query) with fakes.
"""

from __future__ import annotations

import ast
import dataclasses
import doctest
import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import torchplace._devices as tpd
from torchplace._devices import (
    DeviceInfo,
    GpuProcess,
    auto_choice,
    device,
    devices,
    discovery,
    explain_auto,
    probe,
)

GIB = 1024**3

CPU_BUILD = {"__version__": "2.13.0+cpu", "cuda": None, "hip": None, "xpu": None}
CUDA_BUILD = {"__version__": "2.13.0+cu128", "cuda": "12.8", "hip": None, "xpu": None}
ROCM_BUILD = {"__version__": "2.13.0+rocm6.4", "cuda": None, "hip": "6.4.1", "xpu": None}


class FakeNVMLError(Exception):
    """Stands in for pynvml.NVMLError_*; the class name selects the hint."""


class NVMLError_LibraryNotFound(Exception):  # the real pynvml class name
    pass


class FakeNvml:
    """The subset of pynvml that torchplace calls, over a list of fake GPUs.

    Each GPU is a dict: uuid, name, free, total and optionally util, temp, power (mW),
    limit (mW), procs [(pid, used bytes)]. ``failing`` names functions that raise.
    """

    nvmlMemory_v2 = 0x02000028

    def __init__(self, gpus: list[dict[str, Any]], failing: tuple[str, ...] = ()) -> None:
        self.gpus = gpus
        self.failing = set(failing)
        self.shutdowns = 0

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "failing"):
            raise FakeNVMLError(f"{name}: Not Supported")
        return object.__getattribute__(self, name)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < len(self.gpus):
            raise FakeNVMLError("Invalid Argument")
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        for i, gpu in enumerate(self.gpus):
            if gpu["uuid"] == uuid:
                return i
        raise FakeNVMLError("Not Found")

    def nvmlDeviceGetIndex(self, handle: int) -> int:
        return handle

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return str(self.gpus[handle]["uuid"])

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return str(self.gpus[handle]["name"]).encode()  # old bindings return bytes

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None) -> Any:
        gpu = self.gpus[handle]
        return SimpleNamespace(free=gpu["free"], total=gpu["total"])

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        return SimpleNamespace(gpu=self.gpus[handle].get("util", 0), memory=0)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return int(self.gpus[handle].get("temp", 40))

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return int(self.gpus[handle].get("power", 70_000))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return int(self.gpus[handle].get("limit", 700_000))

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:
        procs = self.gpus[handle].get("procs", [])
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in procs]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: int) -> list[Any]:
        return []

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        return f"/usr/bin/proc{pid}"


def cuda_props(name: str, cc: tuple[int, int], total: int, uuid: str | None = None) -> Any:
    return SimpleNamespace(
        name=name,
        major=cc[0],
        minor=cc[1],
        total_memory=total,
        multi_processor_count=132,
        uuid=uuid,
    )


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHPLACE_DEVICE", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def fake_machine(
    monkeypatch: pytest.MonkeyPatch,
    *,
    build: dict[str, Any] = CPU_BUILD,
    props: list[Any] = (),  # type: ignore[assignment]
    nvml: FakeNvml | Exception | None = None,
    torch_mem: list[tuple[int, int]] | None = None,
    mps: bool = False,
    xpu: int = 0,
) -> list[int]:
    """Patch every seam; returns a list that records each torch.cuda.mem_get_info call."""
    mem_calls: list[int] = []

    def mem_get_info(i: int) -> tuple[int, int]:
        mem_calls.append(i)
        if torch_mem is None:
            raise RuntimeError("CUDA driver error")
        return torch_mem[i]

    def nvml_open() -> Any:
        if isinstance(nvml, Exception):
            raise nvml
        if nvml is None:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
        return nvml

    monkeypatch.setattr(probe, "torch_version_fields", lambda: dict(build))
    monkeypatch.setattr(probe, "cuda_device_count", lambda: len(props))
    monkeypatch.setattr(probe, "cuda_properties", lambda i: props[i])
    monkeypatch.setattr(probe, "cuda_mem_get_info", mem_get_info)
    monkeypatch.setattr(probe, "cuda_current_device", lambda: 0)
    monkeypatch.setattr(probe, "nvml_open", nvml_open)
    monkeypatch.setattr(probe, "mps_available", lambda: mps)
    monkeypatch.setattr(probe, "mps_recommended_max_memory", lambda: 18 * GIB)
    monkeypatch.setattr(probe, "xpu_device_count", lambda: xpu)
    monkeypatch.setattr(
        probe, "xpu_properties", lambda i: SimpleNamespace(name="Intel Arc", total_memory=16 * GIB)
    )
    monkeypatch.setattr(probe, "xpu_mem_get_info", lambda i: (10 * GIB, 16 * GIB))
    return mem_calls


def two_gpus(free0: int, free1: int) -> tuple[list[Any], FakeNvml]:
    props = [
        cuda_props("NVIDIA A100-SXM4-80GB", (8, 0), 80 * GIB, "GPU-aaaa-0000"),
        cuda_props("NVIDIA A100-SXM4-80GB", (8, 0), 80 * GIB, "GPU-bbbb-1111"),
    ]
    nvml = FakeNvml(
        [
            {
                "uuid": "GPU-aaaa-0000",
                "name": "NVIDIA A100-SXM4-80GB",
                "free": free0,
                "total": 81 * GIB,
            },
            {
                "uuid": "GPU-bbbb-1111",
                "name": "NVIDIA A100-SXM4-80GB",
                "free": free1,
                "total": 81 * GIB,
            },
        ]
    )
    return props, nvml


# ------------------------------------------------------------------ the spec parser


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("cpu", "cpu"),
        (" CPU ", "cpu"),
        ("cpu:0", "cpu"),
        ("cuda", "cuda:0"),
        ("CUDA:1", "cuda:1"),
        ("gpu", "cuda:0"),
        ("gpu:1", "cuda:1"),
        (0, "cuda:0"),
        (1, "cuda:1"),
        (torch.device("cuda", 1), "cuda:1"),
        (torch.device("cuda"), "cuda:0"),
        (torch.device("cpu"), "cpu"),
    ],
)
def test_valid_specs(monkeypatch: pytest.MonkeyPatch, spec: Any, expected: str) -> None:
    props, nvml = two_gpus(10 * GIB, 20 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    assert device(spec) == torch.device(expected)


def test_bare_cuda_means_the_current_device(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 20 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    monkeypatch.setattr(probe, "cuda_current_device", lambda: 1)
    assert device("cuda") == torch.device("cuda:1")


def test_mps_and_xpu_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, mps=True, xpu=2)
    assert device("mps") == torch.device("mps:0")
    assert device("xpu") == torch.device("xpu:0")
    assert device("xpu:1") == torch.device("xpu:1")
    with pytest.raises(
        ValueError, match=r"2 XPU device\(s\) are visible; use an index from 0 to 1"
    ):
        device("xpu:2")
    with pytest.raises(ValueError, match="there is one MPS device"):
        device("mps:1")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tpu", r"unknown device type 'tpu'.*valid device types are auto, cpu, cuda"),
        ("cdua", r"unknown device type 'cdua'; did you mean 'cuda'\?"),
        ("cdua:1", r"unknown device type 'cdua'; did you mean 'cuda'\?"),
        ("mpss", r"did you mean 'mps'\?"),
        ("banana", r"unknown device type 'banana' \(valid device types"),
        ("cuda:x", r"'cuda:x': the index 'x' is not a non-negative integer; write e.g. 'cuda:0'"),
        ("cuda:", r"the index '' is not a non-negative integer"),
        ("cuda:0:1", r"the index '0:1' is not a non-negative integer"),
        ("cuda:١", r"is not a non-negative integer"),  # an Arabic-Indic digit one
        ("cuda:-1", r"'cuda:-1': a device index must be >= 0, got -1"),
        (-1, r"CUDA ordinal -1: a device index must be >= 0, got -1"),
        ("", r"the device is empty"),
        ("auto:0", r"'auto' takes no index"),
        ("cpu:1", r"there is one CPU device; use 'cpu'"),
        (True, r"True: a bool is not a device"),
        (1.5, r"expected a string, an int or a torch.device, got float"),
        (None, r"expected a string, an int or a torch.device, got NoneType"),
        (torch.device("meta"), r"'meta': unknown device type 'meta'"),
    ],
)
def test_bad_specs(monkeypatch: pytest.MonkeyPatch, spec: Any, message: str) -> None:
    props, nvml = two_gpus(10 * GIB, 20 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    with pytest.raises(ValueError, match=message):
        device(spec)


def test_ordinal_out_of_range_names_the_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 20 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(ValueError) as e:
        device("cuda:3")
    assert str(e.value).startswith(
        "cuda:3 requested but 2 CUDA devices are visible (CUDA_VISIBLE_DEVICES=0,1); "
        "use an index from 0 to 1"
    )


def test_ordinal_out_of_range_explains_renumbering(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 20 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props[:1], nvml=nvml)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    with pytest.raises(ValueError) as e:
        device(2)
    text = str(e.value)
    assert "cuda:2 requested but 1 CUDA device is visible (CUDA_VISIBLE_DEVICES=2)" in text
    assert "physical GPU 2 is cuda:0" in text


def test_ordinal_out_of_range_without_env(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 20 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    with pytest.raises(ValueError, match=r"\(CUDA_VISIBLE_DEVICES is not set\)"):
        device("gpu:2")


def test_cuda_on_cpu_only_build(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, build=CPU_BUILD)
    with pytest.raises(RuntimeError) as e:
        device("cuda")
    assert str(e.value) == (
        "'cuda' requested but no CUDA device can be used: torch 2.13.0+cpu is a CPU-only "
        "build; to use an NVIDIA GPU install a CUDA build: https://pytorch.org/get-started/locally/"
    )


def test_cpu_only_build_mentions_gpus_the_driver_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    _, nvml = two_gpus(10 * GIB, 20 * GIB)
    fake_machine(monkeypatch, build=CPU_BUILD, nvml=nvml)
    with pytest.raises(
        RuntimeError, match=r"although the NVIDIA driver sees 2 GPU\(s\): NVIDIA A100"
    ):
        device(0)


def test_cuda_build_without_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, build=CUDA_BUILD)
    with pytest.raises(RuntimeError) as e:
        device("cuda:0")
    text = str(e.value)
    assert "torch 2.13.0+cu128 is a CUDA 12.8 build but sees no GPU" in text
    assert "nvidia-smi" in text and "NVML: NVML Shared Library Not Found" in text
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RuntimeError, match=r"CUDA_VISIBLE_DEVICES='' may hide every GPU; unset it"):
        device("cuda:0")


def test_mps_and_xpu_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, build=CPU_BUILD)
    with pytest.raises(RuntimeError, match="'mps' requested but MPS is not available: MPS"):
        device("mps")
    with pytest.raises(RuntimeError, match=r"'xpu' requested but no Intel XPU is available"):
        device("xpu")


# ------------------------------------------------------------------ auto selection


def test_auto_picks_the_cuda_device_with_most_free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 70 * GIB)
    mem_calls = fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    chosen, reason = explain_auto()
    assert chosen == torch.device("cuda:1") == device() == device("auto")
    assert reason == (
        "cuda:1 has the most free memory of the 2 visible CUDA devices "
        "(70.0 GiB free; cuda:0 10.0 GiB)"
    )
    assert mem_calls == []  # NVML answered: no CUDA context was needed
    assert nvml.shutdowns >= 1


def test_auto_tie_prefers_the_lowest_ordinal(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(30 * GIB, 30 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    assert auto_choice()[0] == "cuda:0"


def test_auto_without_nvml_takes_the_first_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    props, _ = two_gpus(10 * GIB, 70 * GIB)
    mem_calls = fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=None)
    spec, reason = auto_choice()
    assert spec == "cuda:0"
    assert "free memory is unknown" in reason and "NVML Shared Library Not Found" in reason
    assert mem_calls == []  # auto never creates a CUDA context on every device


def test_auto_single_cuda_device(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 70 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props[:1], nvml=nvml)
    assert auto_choice() == ("cuda:0", "cuda:0 is the only visible CUDA device")


def test_auto_mps_only(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, build=CPU_BUILD, mps=True, xpu=1)
    spec, reason = auto_choice()
    assert spec == "mps:0" and "MPS" in reason


def test_auto_xpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, build=CPU_BUILD, xpu=1)
    assert auto_choice()[0] == "xpu:0"


def test_auto_nothing_is_cpu_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, build=CPU_BUILD)
    chosen, reason = explain_auto()
    assert chosen == torch.device("cpu")
    assert reason.startswith("no GPU: torch 2.13.0+cpu is a CPU-only build")
    assert tpd.no_gpu_reason() is not None and tpd.no_gpu_reason() in reason


def test_no_gpu_reason_is_none_with_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 70 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    assert tpd.no_gpu_reason() is None


# ------------------------------------------------------------------ TORCHPLACE_DEVICE


def test_env_overrides_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 70 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    monkeypatch.setenv("TORCHPLACE_DEVICE", "cpu")
    assert explain_auto() == (torch.device("cpu"), "TORCHPLACE_DEVICE=cpu overrides auto")
    monkeypatch.setenv("TORCHPLACE_DEVICE", " GPU:0 ")
    assert device() == torch.device("cuda:0")
    assert device("cuda:1") == torch.device("cuda:1")  # explicit specs ignore the variable


def test_env_auto_means_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 70 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    monkeypatch.setenv("TORCHPLACE_DEVICE", "Auto")
    assert device() == torch.device("cuda:1")
    monkeypatch.setenv("TORCHPLACE_DEVICE", "")
    assert device() == torch.device("cuda:1")


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("cdua", ValueError, r"^TORCHPLACE_DEVICE='cdua': unknown device type 'cdua'; did you"),
        ("cuda:x", ValueError, r"^TORCHPLACE_DEVICE='cuda:x': the index 'x'"),
        ("cuda:5", ValueError, r"^TORCHPLACE_DEVICE='cuda:5': cuda:5 requested but 2 CUDA"),
        ("mps", RuntimeError, r"^TORCHPLACE_DEVICE='mps' requested but MPS is not available"),
    ],
)
def test_env_is_validated_and_named(
    monkeypatch: pytest.MonkeyPatch, value: str, error: type[Exception], message: str
) -> None:
    props, nvml = two_gpus(10 * GIB, 70 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    monkeypatch.setenv("TORCHPLACE_DEVICE", value)
    with pytest.raises(error, match=message):
        device("auto")
    assert device("cpu") == torch.device("cpu")  # only "auto" reads the variable


# ------------------------------------------------------------------ discovery


def test_devices_lists_cuda_with_nvml_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 70 * GIB)
    nvml.gpus[1].update(util=87, temp=66, power=312_500, limit=400_000, procs=[(4242, 5 * GIB)])
    mem_calls = fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    cpu, gpu0, gpu1 = devices()
    assert cpu.type == "cpu" and gpu0.spec == "cuda:0" and gpu1.spec == "cuda:1"
    assert gpu1.name == "NVIDIA A100-SXM4-80GB"
    assert gpu1.total_memory == 80 * GIB  # torch's total, as its OOM messages count it
    assert (gpu1.free_memory, gpu1.memory_source) == (70 * GIB, "nvml")
    assert gpu1.compute_capability == (8, 0) and gpu1.multiprocessors == 132
    assert (gpu1.uuid, gpu1.nvml_index) == ("GPU-bbbb-1111", 1)
    assert (gpu1.utilization, gpu1.temperature) == (87, 66)
    assert (gpu1.power_draw, gpu1.power_limit) == (312.5, 400.0)
    assert gpu1.driver_version == "550.54.15"
    assert gpu1.processes == (GpuProcess(pid=4242, name="/usr/bin/proc4242", used_memory=5 * GIB),)
    assert gpu0.processes == ()
    assert mem_calls == []


@pytest.mark.parametrize(
    ("cc", "expected"), [((6, 1), False), ((7, 5), False), ((8, 0), True), ((9, 0), True)]
)
def test_bf16_and_tf32_need_compute_capability_8(
    monkeypatch: pytest.MonkeyPatch, cc: tuple[int, int], expected: bool
) -> None:
    fake_machine(monkeypatch, build=CUDA_BUILD, props=[cuda_props("GPU", cc, 16 * GIB)])
    gpu = devices()[1]
    assert (gpu.bf16, gpu.tf32) == (expected, expected)


def test_rocm_leaves_bf16_and_tf32_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    props = [cuda_props("AMD Instinct MI300X", (9, 4), 192 * GIB, "abcd")]
    fake_machine(monkeypatch, build=ROCM_BUILD, props=props, torch_mem=[(100 * GIB, 192 * GIB)])
    gpu = devices()[1]
    assert (gpu.bf16, gpu.tf32, gpu.uuid) == (None, None, None)
    assert (gpu.free_memory, gpu.memory_source) == (100 * GIB, "torch")


def test_nvml_absent_gives_none_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    props, _ = two_gpus(0, 0)
    mem_calls = fake_machine(
        monkeypatch, build=CUDA_BUILD, props=props, nvml=None, torch_mem=[(5 * GIB, 79 * GIB)] * 2
    )
    gpu = devices()[1]
    assert (gpu.free_memory, gpu.memory_source, gpu.total_memory) == (5 * GIB, "torch", 80 * GIB)
    nvml_fields = ("nvml_index", "utilization", "temperature", "power_draw", "power_limit")
    assert all(getattr(gpu, f) is None for f in (*nvml_fields, "driver_version", "processes"))
    assert gpu.compute_capability == (8, 0)
    assert mem_calls == [0, 1]


def test_nvml_import_error_is_a_none_and_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, nvml=ImportError("No module named 'pynvml'"))
    status = tpd.nvml_status()
    assert status.error == "the nvidia-ml-py package is not installed: pip install nvidia-ml-py"
    assert (status.driver_version, status.gpus) == (None, ())


def test_nvml_library_not_found_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, nvml=None)
    error = tpd.nvml_status().error
    assert error == "NVML Shared Library Not Found (no NVIDIA driver is installed on this machine)"


def test_nvml_raising_per_call_degrades_per_field(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 70 * GIB)
    nvml.failing = {
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetGraphicsRunningProcesses",
    }
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)
    gpu = devices()[2]
    assert (gpu.power_draw, gpu.temperature, gpu.processes) == (None, None, None)
    assert (gpu.power_limit, gpu.free_memory, gpu.utilization) == (700.0, 70 * GIB, 0)


def test_nvml_memory_failing_falls_back_to_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 70 * GIB)
    nvml.failing = {"nvmlDeviceGetMemoryInfo"}
    mem_calls = fake_machine(
        monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml, torch_mem=[(1, 2), (3, 4)]
    )
    assert [(d.free_memory, d.memory_source) for d in devices()[1:]] == [(1, "torch"), (3, "torch")]
    assert mem_calls == [0, 1]
    assert "free memory is unknown" in auto_choice()[1]


def test_broken_torch_properties_are_none_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    props, nvml = two_gpus(10 * GIB, 70 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)

    def broken(i: int) -> Any:
        raise RuntimeError("CUDA error: unknown error")

    monkeypatch.setattr(probe, "cuda_properties", broken)
    gpu = devices()[1]
    assert gpu.compute_capability is None and gpu.bf16 is None
    assert gpu.name == "NVIDIA A100-SXM4-80GB"  # NVML still names it
    assert (gpu.total_memory, gpu.nvml_index) == (81 * GIB, 0)


def test_nvml_status_reports_driver_and_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    _, nvml = two_gpus(10 * GIB, 70 * GIB)
    fake_machine(monkeypatch, nvml=nvml)
    status = tpd.nvml_status()
    assert status.driver_version == "550.54.15" and status.cuda_driver_version == "12.4"
    assert status.gpus == ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB")
    assert status.error is None


def test_mps_and_xpu_records(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, mps=True, xpu=1)
    _, mps, xpu = devices()
    assert (mps.spec, mps.total_memory, mps.name, mps.free_memory) == (
        "mps:0",
        18 * GIB,
        None,
        None,
    )
    assert (xpu.spec, xpu.name, xpu.total_memory, xpu.free_memory) == (
        "xpu:0",
        "Intel Arc",
        16 * GIB,
        10 * GIB,
    )


# ------------------------------------------------------------------ CUDA_VISIBLE_DEVICES


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", []),
        ("0,1", [0, 1]),
        (" 2 , 3 ", [2, 3]),
        ("1gpu,2", [1, 2]),  # CUDA reads a leading number, like strtoul
        ("0,-1,2", [0]),  # the list ends at the first entry CUDA cannot read
        ("0,0", []),  # a repeated entry hides every device
        ("GPU-abc,GPU-def", ["GPU-abc", "GPU-def"]),
        ("MIG-1234", ["MIG-1234"]),
    ],
)
def test_parse_visible(value: str | None, expected: list[Any] | None) -> None:
    assert tpd.nvml.parse_visible(value) == expected


def test_nvml_index_mapping() -> None:
    uuids = ["GPU-aaaa-0000", "GPU-bbbb-1111", "GPU-bbbc-2222"]
    index = tpd.nvml.index_for
    assert index(1, None, lambda: uuids) == 1
    assert index(0, "2,1", lambda: uuids) == 2
    assert index(2, "2,1", lambda: uuids) is None
    assert index(0, "GPU-bbbb", lambda: uuids) == 1  # a unique UUID prefix
    assert index(0, "GPU-bbb", lambda: uuids) is None  # ambiguous
    assert index(0, "MIG-1234", lambda: uuids) is None


def test_visible_devices_map_to_nvml_by_index(monkeypatch: pytest.MonkeyPatch) -> None:
    _, nvml = two_gpus(10 * GIB, 70 * GIB)
    nvml.gpus += [
        {"uuid": "GPU-cccc", "name": "NVIDIA H100", "free": 5 * GIB, "total": 80 * GIB},
        {"uuid": "GPU-dddd", "name": "NVIDIA H100", "free": 50 * GIB, "total": 80 * GIB},
    ]
    props = [
        cuda_props("NVIDIA H100", (9, 0), 79 * GIB),
        cuda_props("NVIDIA H100", (9, 0), 79 * GIB),
    ]
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props, nvml=nvml)  # torch gives no UUID
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,2")
    found = devices()
    assert [(d.spec, d.nvml_index, d.free_memory) for d in found[1:]] == [
        ("cuda:0", 3, 50 * GIB),
        ("cuda:1", 2, 5 * GIB),
    ]
    assert auto_choice()[0] == "cuda:0"


def test_visible_devices_by_uuid_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    _, nvml = two_gpus(10 * GIB, 70 * GIB)
    fake_machine(monkeypatch, build=CUDA_BUILD, props=[cuda_props("A", (8, 0), GIB)], nvml=nvml)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb")
    assert devices()[1].nvml_index == 1


def test_torch_uuid_wins_over_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA_DEVICE_ORDER=FASTEST_FIRST may number devices unlike NVML: the UUID is exact.
    props, nvml = two_gpus(10 * GIB, 70 * GIB)
    props[0].uuid = "bbbb-1111"  # torch prints the UUID without the GPU- prefix
    fake_machine(monkeypatch, build=CUDA_BUILD, props=props[:1], nvml=nvml)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    gpu = devices()[1]
    assert (gpu.uuid, gpu.nvml_index, gpu.free_memory) == ("GPU-bbbb-1111", 1, 70 * GIB)


# ------------------------------------------------------------------ records and the CPU


def test_device_info_is_frozen_and_serialisable() -> None:
    info = DeviceInfo(
        type="cuda",
        index=0,
        compute_capability=(9, 0),
        processes=(GpuProcess(pid=1, name="python", used_memory=3),),
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.name = "x"  # type: ignore[misc]
    data = json.loads(json.dumps(info.to_dict()))
    assert data["compute_capability"] == [9, 0]
    assert data["processes"] == [{"pid": 1, "name": "python", "used_memory": 3}]
    assert data["spec"] == "cuda:0"
    assert info.torch_device == torch.device("cuda:0")
    assert DeviceInfo(type="cpu").torch_device == torch.device("cpu")


def test_cpu_record_from_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {
        "cpuinfo": "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
        "flags\t\t: fpu sse avx512f amx_bf16 avx512_bf16\n",
        "meminfo": "MemTotal:       16384000 kB\nMemFree:  1 kB\nMemAvailable:    8192000 kB\n",
    }
    monkeypatch.setattr(probe, "read_proc", files.get)
    monkeypatch.setattr(probe, "cpu_count", lambda: 56)
    cpu = discovery._cpu_info()
    assert cpu.name == "Intel(R) Xeon(R) Platinum 8480+"
    assert (cpu.total_memory, cpu.free_memory) == (16384000 * 1024, 8192000 * 1024)
    assert (cpu.bf16, cpu.cores, cpu.memory_source) == (True, 56, "os")


def test_cpu_without_bf16_and_arm_features(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "read_proc", {"cpuinfo": "flags\t: fpu sse avx2\n"}.get)
    assert discovery._cpu_info().bf16 is False
    monkeypatch.setattr(probe, "read_proc", {"cpuinfo": "Features\t: fp asimd bf16\n"}.get)
    assert discovery._cpu_info().bf16 is True
    monkeypatch.setattr(probe, "read_proc", lambda name: None)
    cpu = discovery._cpu_info()
    assert cpu.bf16 is None and cpu.name  # platform fallback names it


def test_real_devices_on_this_machine() -> None:
    found = devices()
    cpu = found[0]
    assert cpu.type == "cpu" and cpu.cores is not None and cpu.cores >= 1
    assert cpu.total_memory is not None and cpu.total_memory > 0
    assert [d.index for d in found if d.type == "cuda"] == list(range(torch.cuda.device_count()))
    json.dumps([d.to_dict() for d in found])


# ------------------------------------------------------------------ the torch build


def test_build_read_from_file_matches_torch() -> None:
    fields = probe._parse_torch_version_file()
    assert fields is not None
    assert fields["__version__"] == torch.__version__
    assert fields["cuda"] == torch.version.cuda
    assert fields.get("hip") == torch.version.hip


@pytest.mark.parametrize(
    ("build", "kind", "cpu_only"),
    [
        (CPU_BUILD, "CPU-only", True),
        (CUDA_BUILD, "CUDA 12.8", False),
        (ROCM_BUILD, "ROCm 6.4.1", False),
    ],
)
def test_build_kind(
    monkeypatch: pytest.MonkeyPatch, build: dict[str, Any], kind: str, cpu_only: bool
) -> None:
    monkeypatch.setattr(probe, "torch_version_fields", lambda: dict(build))
    assert (tpd.torch_build().kind, tpd.torch_build().cpu_only) == (kind, cpu_only)


def test_import_and_discovery_without_a_gpu_do_not_import_torch() -> None:
    code = (
        "import sys, torchplace._devices as d\n"
        "assert 'torch' not in sys.modules, 'import'\n"
        "b = d.torch_build(); d.devices(); d.auto_choice()\n"
        "print(b.cpu_only, d.probe.cuda_driver_loads(), 'torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    cpu_only, driver, imported = result.stdout.split()
    if cpu_only == "True" or (torch.version.cuda and driver == "False"):
        assert imported == "False"


# ------------------------------------------------------------------ seams without torch


class _NoTorchCount:
    """Stands in for torch.cuda.device_count; records that torch was asked."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.count


@pytest.mark.parametrize(
    ("build", "driver", "expected", "asked_torch"),
    [
        (CPU_BUILD, True, 0, False),  # no CUDA in the build: nothing to ask
        (CUDA_BUILD, False, 0, False),  # no driver library: torch would see nothing either
        (CUDA_BUILD, True, 3, True),
        (CUDA_BUILD, None, 3, True),  # unknown: ask torch
        (ROCM_BUILD, False, 3, True),  # ROCm needs no NVIDIA driver
    ],
)
def test_cuda_device_count_asks_torch_only_where_it_can_answer(
    monkeypatch: pytest.MonkeyPatch,
    build: dict[str, Any],
    driver: bool | None,
    expected: int,
    asked_torch: bool,
) -> None:
    count = _NoTorchCount(3)
    monkeypatch.setattr(probe, "torch_version_fields", lambda: dict(build))
    monkeypatch.setattr(probe, "cuda_driver_loads", lambda: driver)
    monkeypatch.setattr(torch.cuda, "device_count", count)
    assert probe.cuda_device_count() == expected
    assert count.calls == int(asked_torch)


def test_without_the_cuda_driver_torch_sees_no_cuda_device() -> None:
    # the premise of the shortcut above, checked against this machine's torch
    if probe.cuda_driver_loads() is False:
        assert torch.cuda.device_count() == 0
    assert probe.cuda_driver_loads() in ((True, False) if sys.platform != "darwin" else (None,))


def _fake_cudnn_wheel(root: Any, major: int, minor: int, patch: int, scale: int) -> None:
    include, lib = root / "nvidia/cudnn/include", root / "nvidia/cudnn/lib"
    include.mkdir(parents=True)
    lib.mkdir(parents=True)
    (include / "cudnn_version.h").write_text(
        "#ifndef CUDNN_VERSION_H_\n#define CUDNN_VERSION_H_\n\n"
        f"#define CUDNN_MAJOR {major}\n#define CUDNN_MINOR {minor}\n"
        f"#define CUDNN_PATCHLEVEL {patch}\n\n"
        f"#define CUDNN_VERSION (CUDNN_MAJOR * {scale} + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)\n"
    )
    (lib / f"libcudnn.so.{major}").write_bytes(b"\x7fELF")


@pytest.mark.parametrize(
    ("version", "scale", "expected"), [((9, 24, 0), 10000, 92400), ((8, 9, 7), 1000, 8907)]
)
def test_pip_cudnn_version_from_the_wheel_beside_torch(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    version: tuple[int, int, int],
    scale: int,
    expected: int,
) -> None:
    monkeypatch.setattr(probe, "torch_package_dir", lambda: tmp_path / "torch")
    assert probe.pip_cudnn_version() is None  # no wheel beside torch
    _fake_cudnn_wheel(tmp_path, *version, scale)
    assert probe.pip_cudnn_version() == expected
    (tmp_path / f"nvidia/cudnn/lib/libcudnn.so.{version[0]}").unlink()
    assert probe.pip_cudnn_version() is None  # a header without its library: ask torch


@pytest.mark.skipif(torch.version.cuda is None, reason="only a CUDA build of torch has cuDNN")
def test_pip_cudnn_version_matches_torch() -> None:
    version = probe.pip_cudnn_version()
    if version is None:
        pytest.skip("this torch's cuDNN is not the pip wheel beside it (conda, a source build)")
    assert version == torch.backends.cudnn.version()


def test_torch_compile_definitions(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setattr(probe, "torch_package_dir", lambda: tmp_path)
    assert probe.torch_compile_definitions() is None
    cmake = tmp_path / "share/cmake/Caffe2"
    cmake.mkdir(parents=True)
    (cmake / "Caffe2Targets.cmake").write_text(
        "set_target_properties(torch_cpu PROPERTIES\n"
        '  INTERFACE_COMPILE_DEFINITIONS "USE_DISTRIBUTED;USE_C10D_GLOO"\n)\n'
        "set_target_properties(torch_cuda PROPERTIES\n"
        '  INTERFACE_COMPILE_DEFINITIONS "USE_C10D_NCCL"\n)\n'
    )
    assert probe.torch_compile_definitions() == {
        "USE_DISTRIBUTED",
        "USE_C10D_GLOO",
        "USE_C10D_NCCL",
    }


# ------------------------------------------------------------------ a real GPU


@pytest.mark.gpu
def test_real_cuda_devices() -> None:
    gpus = [d for d in devices() if d.type == "cuda"]
    assert len(gpus) == torch.cuda.device_count()
    for gpu in gpus:
        assert gpu.index is not None
        assert gpu.name == torch.cuda.get_device_name(gpu.index)
        assert gpu.compute_capability == torch.cuda.get_device_capability(gpu.index)
        assert gpu.total_memory == torch.cuda.get_device_properties(gpu.index).total_memory
        assert gpu.free_memory is not None and 0 < gpu.free_memory <= (gpu.total_memory or 0) * 1.1
    assert device("auto").type == "cuda"


# ------------------------------------------------------------------ the package's layers


def _torchplace_imports(source: str) -> set[str]:
    """What a module imports from torchplace: ``_devices`` layers by name, else the module."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module == "torchplace._devices":
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        for module in modules:
            if module.startswith("torchplace._devices."):
                found.add(module.split(".")[2])
            elif module.startswith("torchplace"):
                found.add(module)
    return found


def test_device_modules_import_only_the_layers_below() -> None:
    order = ["probe", "build", "nvml", "discovery", "spec", "choice"]
    root = Path(tpd.__file__).parent
    assert sorted(p.stem for p in root.glob("*.py")) == sorted([*order, "__init__"])
    for position, name in enumerate(order):
        imported = _torchplace_imports((root / f"{name}.py").read_text(encoding="utf-8"))
        assert imported <= set(order[:position]), f"{name} imports {imported}"


@pytest.mark.parametrize(
    "name", ["", ".probe", ".build", ".nvml", ".discovery", ".spec", ".choice"]
)
def test_examples_in_the_docstrings_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(f"torchplace._devices{name}"))
    assert result.failed == 0
