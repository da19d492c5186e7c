"""Discovery: every device this process can use, per backend, and why there is no GPU.

``devices()`` lists the CPU and every CUDA (or ROCm), MPS and XPU device torch can
use, with memory, compute capability, bf16/TF32 support and, where NVML answers, the
``nvidia-smi`` facts. Free GPU memory comes from NVML, which needs no CUDA context; only
where NVML does not answer does ``devices()`` fall back to ``torch.cuda.mem_get_info``
(which creates one). ``no_gpu_reason()`` says why torch can use no GPU, and what to do.

Examples:
    >>> devices()[0].type  # the CPU is always listed first
    'cpu'
"""

from __future__ import annotations

import os
import platform
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from torchplace._devices import nvml, probe
from torchplace._devices.build import torch_build
from torchplace._devices.nvml import GpuProcess, nvml_status

if TYPE_CHECKING:
    import torch

__all__ = [
    "DeviceInfo",
    "cuda_uuid",
    "devices",
    "no_cuda_reason",
    "no_gpu_reason",
    "no_mps_reason",
    "try_query",
    "visible_text",
]


@dataclass(frozen=True, kw_only=True)
class DeviceInfo:
    """What one device can do, as far as its backend can tell. Unknown fields are ``None``.

    Attributes:
        type: ``"cpu"``, ``"cuda"`` (also ROCm), ``"mps"`` or ``"xpu"``.
        index: The torch ordinal (``cuda:1`` has index 1); ``None`` for the CPU.
        name: Model name, e.g. ``"NVIDIA H100 80GB HBM3"`` or the CPU model.
        total_memory: Bytes: the device total torch reports; system RAM for the CPU;
            Metal's recommended working-set size for MPS.
        free_memory: Bytes free right now (device-wide, all processes).
        memory_source: Where ``free_memory`` came from: ``"nvml"``, ``"torch"`` (a
            CUDA context was created to ask) or ``"os"`` (the CPU).
        compute_capability: CUDA ``(major, minor)``; on ROCm, the HIP numbers torch
            reports.
        bf16: Native bfloat16 support: compute capability >= 8.0 on CUDA;
            ``avx512_bf16``/``amx_bf16`` (or Arm ``bf16``) for the CPU.
        tf32: TensorFloat-32 matmuls, compute capability >= 8.0 on CUDA.
        multiprocessors: Streaming multiprocessors (CUDA) or compute units (ROCm).
        cores: Logical CPU cores this process may run on (the CPU only).
        uuid: Device UUID as NVML and ``nvidia-smi -L`` print it (``GPU-...``).
        nvml_index: The index ``nvidia-smi`` shows for this device; differs from
            ``index`` under ``CUDA_VISIBLE_DEVICES``.
        utilization: Percent of the last sample period a kernel was running (NVML).
        temperature: GPU temperature in degrees Celsius (NVML).
        power_draw: Watts drawn now (NVML).
        power_limit: Enforced power limit in watts (NVML).
        driver_version: NVIDIA driver version (NVML).
        processes: Processes using the device (NVML), ``None`` when not known.

    Examples:
        >>> info = DeviceInfo(type="cuda", index=1, name="NVIDIA A100", bf16=True)
        >>> info.spec, info.torch_device
        ('cuda:1', device(type='cuda', index=1))
        >>> info.to_dict()["name"]
        'NVIDIA A100'
    """

    type: str
    index: int | None = None
    name: str | None = None
    total_memory: int | None = None
    free_memory: int | None = None
    memory_source: str | None = None
    compute_capability: tuple[int, int] | None = None
    bf16: bool | None = None
    tf32: bool | None = None
    multiprocessors: int | None = None
    cores: int | None = None
    uuid: str | None = None
    nvml_index: int | None = None
    utilization: int | None = None
    temperature: int | None = None
    power_draw: float | None = None
    power_limit: float | None = None
    driver_version: str | None = None
    processes: tuple[GpuProcess, ...] | None = None

    @property
    def spec(self) -> str:
        """The device as a string torch accepts, e.g. ``"cuda:1"`` or ``"cpu"``."""
        return self.type if self.index is None else f"{self.type}:{self.index}"

    @property
    def torch_device(self) -> torch.device:
        """The ``torch.device`` for this record (imports torch)."""
        import torch

        return torch.device(self.spec)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data: every field plus ``spec``; memory in bytes."""
        data = asdict(self)
        data["spec"] = self.spec
        return data


def try_query(query: Callable[..., Any], *args: Any) -> Any:
    """A backend query that may fail on a broken setup; its failure means "unknown"."""
    try:
        return query(*args)
    except Exception:
        return None


def cuda_uuid(props: Any) -> str | None:
    """The ``GPU-...`` UUID of torch's device properties, as NVML spells it."""
    uuid = getattr(props, "uuid", None)
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


# ------------------------------------------------------------ one record per backend


def _cpu_field(cpuinfo: str, key: str) -> str | None:
    match = re.search(rf"^{key}\s*:\s*(.*)$", cpuinfo, re.MULTILINE)
    return match.group(1).strip() if match else None


def _meminfo_bytes(meminfo: str, key: str) -> int | None:
    match = re.search(rf"^{key}:\s*(\d+)\s*kB", meminfo, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def _cpu_info() -> DeviceInfo:
    cpuinfo = probe.read_proc("cpuinfo") or ""
    name = _cpu_field(cpuinfo, "model name") or platform.processor() or platform.machine()
    flags_line = _cpu_field(cpuinfo, "flags") or _cpu_field(cpuinfo, "Features")
    bf16 = None
    if flags_line is not None:
        bf16 = bool({"avx512_bf16", "amx_bf16", "bf16"} & set(flags_line.split()))
    meminfo = probe.read_proc("meminfo")
    if meminfo is not None:
        total = _meminfo_bytes(meminfo, "MemTotal")
        free = _meminfo_bytes(meminfo, "MemAvailable")
    else:
        total, free = probe.sysconf_memory()
    return DeviceInfo(
        type="cpu",
        name=name or None,
        total_memory=total,
        free_memory=free,
        memory_source="os" if free is not None else None,
        bf16=bf16,
        cores=probe.cpu_count(),
    )


def _cuda_info(index: int, nv: Any | None, *, rocm: bool) -> DeviceInfo:
    props = try_query(probe.cuda_properties, index)
    capability = None if props is None else (int(props.major), int(props.minor))
    uuid = None if rocm else cuda_uuid(props)
    nvml_index, handle = (None, None) if nv is None else nvml.handle_of(nv, index, uuid)
    memory = None if handle is None else nvml.memory(nv, handle)
    source = "nvml" if memory else None
    if memory is None:
        memory = try_query(probe.cuda_mem_get_info, index)
        source = "torch" if memory else None
    total = getattr(props, "total_memory", None)
    if total is None and memory is not None:
        total = memory[1]
    name = getattr(props, "name", None)
    if name is None and handle is not None:
        name = nvml.get(nv, "nvmlDeviceGetName", handle)
    # bf16 and TF32 tensor cores arrive with Ampere (sm_80); the rule is NVIDIA's only.
    modern = None if rocm or capability is None else capability >= (8, 0)
    return DeviceInfo(
        type="cuda",
        index=index,
        name=name,
        total_memory=None if total is None else int(total),
        free_memory=None if memory is None else memory[0],
        memory_source=source,
        compute_capability=capability,
        bf16=modern,
        tf32=modern,
        multiprocessors=getattr(props, "multi_processor_count", None),
        uuid=uuid,
        nvml_index=nvml_index,
        **nvml.device_fields(nv, handle),
    )


def _mps_info() -> DeviceInfo:
    # torch exposes no name, capability or free memory for MPS (unified memory).
    return DeviceInfo(type="mps", index=0, total_memory=try_query(probe.mps_recommended_max_memory))


def _xpu_info(index: int) -> DeviceInfo:
    props = try_query(probe.xpu_properties, index)
    memory = try_query(probe.xpu_mem_get_info, index)
    total = getattr(props, "total_memory", None)
    return DeviceInfo(
        type="xpu",
        index=index,
        name=getattr(props, "name", None),
        total_memory=int(total) if total is not None else (memory[1] if memory else None),
        free_memory=memory[0] if memory else None,
        memory_source="torch" if memory else None,
        driver_version=getattr(props, "driver_version", None),
    )


def devices() -> list[DeviceInfo]:
    """Every device this process can use: the CPU first, then CUDA/ROCm, MPS and XPU.

    Fields a backend cannot answer are ``None``. CUDA devices are listed as torch
    numbers them (after ``CUDA_VISIBLE_DEVICES``), each matched to its NVML record by
    UUID (else through ``CUDA_VISIBLE_DEVICES``) for free memory, utilisation,
    temperature, power, driver and processes, like ``nvidia-smi``. Without NVML (no
    NVIDIA driver, ROCm) free memory comes from ``torch.cuda.mem_get_info``, which
    creates a CUDA context on the device (``memory_source == "torch"``).

    Returns:
        One ``DeviceInfo`` per device, CPU first.

    Examples:
        >>> cpu = devices()[0]
        >>> cpu.type, cpu.index, cpu.cores >= 1
        ('cpu', None, True)
    """
    found = [_cpu_info()]
    count = probe.cuda_device_count()
    if count:
        rocm = torch_build().hip is not None
        with nvml.session() as (nv, _):
            found += [_cuda_info(i, nv, rocm=rocm) for i in range(count)]
    if probe.mps_available():
        found.append(_mps_info())
    found += [_xpu_info(i) for i in range(probe.xpu_device_count())]
    return found


# ------------------------------------------------------------ why there is no GPU


def visible_text() -> str:
    """``CUDA_VISIBLE_DEVICES=...`` or that it is not set, for messages."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "CUDA_VISIBLE_DEVICES is not set" if value is None else f"CUDA_VISIBLE_DEVICES={value}"


def no_cuda_reason() -> str:
    """Why torch sees no CUDA device, with what to do."""
    build = torch_build()
    if build.cuda is None and build.hip is None:
        if build.platform == "darwin":
            return f"torch {build.version} has no CUDA: CUDA does not run on macOS; use 'mps'"
        what = "a CPU-only build" if build.cpu_only else f"an {build.kind} build without CUDA"
        gpus = nvml_status().gpus
        seen = f" although the NVIDIA driver sees {len(gpus)} GPU(s): {', '.join(gpus)}"
        return (
            f"torch {build.version} is {what}{seen if gpus else ''}; to use an NVIDIA GPU "
            f"install a CUDA build: {probe.INSTALL_URL}"
        )
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        fix = f"CUDA_VISIBLE_DEVICES={visible!r} may hide every GPU; unset it or list valid indices"
    else:
        error = nvml_status().error if build.cuda else None
        fix = "check that `nvidia-smi` (or `rocm-smi`) lists a GPU and that the driver is loaded"
        fix += f" (NVML: {error})" if error else ""
    return f"torch {build.version} is a {build.kind} build but sees no GPU; {fix}"


def no_mps_reason() -> str:
    """Why MPS cannot be used here."""
    if sys.platform != "darwin":
        return f"MPS exists only on macOS with Apple silicon, and this is {platform.system()}"
    return (
        "MPS needs Apple silicon, macOS 12.3 or later and a torch build with MPS "
        "(see torch.backends.mps.is_built())"
    )


def no_gpu_reason() -> str | None:
    """Why torch can use no GPU here, with what to do; ``None`` when it can use one.

    Examples:
        >>> reason = no_gpu_reason()
        >>> reason is None or "torch" in reason or "MPS" in reason
        True
    """
    if probe.cuda_device_count() or probe.mps_available() or probe.xpu_device_count():
        return None
    if sys.platform == "darwin" and torch_build().cuda is None:
        return no_mps_reason()
    return no_cuda_reason()
