"""What the NVIDIA driver says through NVML: the ``nvidia-smi`` facts, no CUDA context.

NVML numbers GPUs as the driver does (``nvidia-smi``'s index), torch as CUDA does,
after ``CUDA_VISIBLE_DEVICES``; ``handle_of`` maps torch's ``cuda:N`` to its NVML device by
UUID, else through that variable. Every NVML call degrades to ``None`` when it raises
(an old driver, a field the GPU does not support), and a missing NVML to a sentence.

Examples:
    >>> parse_visible("2,GPU-8f3a")
    [2, 'GPU-8f3a']
    >>> status = nvml_status()
    >>> status.error is None or isinstance(status.error, str)
    True
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from torchplace._devices import probe

__all__ = [
    "GpuProcess",
    "NvmlStatus",
    "device_fields",
    "get",
    "handle_of",
    "index_for",
    "memory",
    "nvml_status",
    "parse_visible",
    "session",
]


@dataclass(frozen=True, kw_only=True)
class GpuProcess:
    """A process holding memory on a GPU, as NVML reports it.

    Attributes:
        pid: Process id (in the driver's PID namespace; inside a container it may be
            the host's).
        name: Executable path from NVML, or ``None`` where NVML would not say.
        used_memory: GPU memory the process holds, in bytes, or ``None`` where the
            driver does not report it (for example under Windows WDDM).

    Examples:
        >>> GpuProcess(pid=42, name="python", used_memory=2**30).used_memory
        1073741824
    """

    pid: int
    name: str | None = None
    used_memory: int | None = None


@dataclass(frozen=True, kw_only=True)
class NvmlStatus:
    """What the NVIDIA driver says through NVML, regardless of torch.

    Attributes:
        driver_version: e.g. ``"550.54.15"``, or ``None``.
        cuda_driver_version: Newest CUDA the driver supports, e.g. ``"12.4"``.
        gpus: Names of every GPU the driver sees (``CUDA_VISIBLE_DEVICES`` does not
            apply here).
        error: Why NVML did not answer, with what to do; ``None`` when it answered.

    Examples:
        >>> NvmlStatus(driver_version=None, cuda_driver_version=None, gpus=(),
        ...            error="no NVIDIA driver").error
        'no NVIDIA driver'
    """

    driver_version: str | None
    cuda_driver_version: str | None
    gpus: tuple[str, ...]
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return asdict(self)


# ------------------------------------------------------------ a session


_HINTS = {
    "NVMLError_LibraryNotFound": "no NVIDIA driver is installed on this machine",
    "NVMLError_DriverNotLoaded": "the NVIDIA driver is not loaded; check `nvidia-smi`",
    "NVMLError_LibRmVersionMismatch": (
        "the NVIDIA driver and its library differ in version; reboot or reload the "
        "nvidia kernel module"
    ),
    "NVMLError_NoPermission": "this user may not query the NVIDIA driver",
}


def _reason(error: Exception) -> str:
    if isinstance(error, ImportError):
        return "the nvidia-ml-py package is not installed: pip install nvidia-ml-py"
    hint = _HINTS.get(type(error).__name__)
    return f"{error} ({hint})" if hint else f"NVML failed: {error}"


@contextmanager
def session() -> Iterator[tuple[Any | None, str | None]]:
    """Yield ``(pynvml, None)`` with NVML initialised, or ``(None, reason)``."""
    nv: Any | None = None
    reason: str | None = None
    try:
        nv = probe.nvml_open()
    except Exception as e:  # any NVML or loader failure means "no NVML", never a crash
        reason = _reason(e)
    try:
        yield nv, reason
    finally:
        if nv is not None:
            probe.nvml_close(nv)


def get(nv: Any, function: str, *args: Any) -> Any:
    """Call one NVML function; ``None`` when it raises or is missing from the bindings."""
    try:
        value = getattr(nv, function)(*args)
    except Exception:  # NVMLError_NotSupported, old drivers, old bindings, ...
        return None
    return value.decode() if isinstance(value, bytes) else value


# ------------------------------------------------------------ torch's ordinal -> NVML


def parse_visible(value: str | None) -> list[int | str] | None:
    """``CUDA_VISIBLE_DEVICES`` as CUDA reads it; None when unset (every device visible).

    Integers are NVIDIA driver indices, ``GPU-``/``MIG-`` entries are UUID prefixes; the
    list ends at the first entry CUDA cannot read, and a repeated entry hides every
    device.
    """
    if value is None:
        return None
    entries: list[int | str] = []
    for raw in value.split(","):
        text = raw.strip()
        entry: int | str
        if text.startswith(("GPU-", "MIG-")):
            entry = text
        else:
            digits = re.match(r"\+?(\d+)", text)
            if digits is None:
                break
            entry = int(digits.group(1))
        if entry in entries:
            return []
        entries.append(entry)
    return entries


def index_for(ordinal: int, visible: str | None, uuids: Callable[[], list[str]]) -> int | None:
    """The NVML index of torch's ``cuda:<ordinal>`` given ``CUDA_VISIBLE_DEVICES``."""
    entries = parse_visible(visible)
    if entries is None:
        return ordinal
    if ordinal >= len(entries):
        return None
    entry = entries[ordinal]
    if isinstance(entry, int):
        return entry
    if entry.startswith("MIG-"):
        return None  # a MIG slice has no index of its own
    matches = [i for i, uuid in enumerate(uuids()) if uuid.startswith(entry)]
    return matches[0] if len(matches) == 1 else None


def _uuids(nv: Any) -> list[str]:
    count = get(nv, "nvmlDeviceGetCount") or 0
    handles = [get(nv, "nvmlDeviceGetHandleByIndex", i) for i in range(count)]
    return [str(get(nv, "nvmlDeviceGetUUID", h) or "") for h in handles]


def handle_of(nv: Any, ordinal: int, uuid: str | None) -> tuple[int | None, Any]:
    """``(nvml_index, handle)`` of ``cuda:<ordinal>``: by UUID, else by CUDA_VISIBLE_DEVICES."""
    if uuid:
        found = get(nv, "nvmlDeviceGetHandleByUUID", uuid)
        if found is not None:
            return get(nv, "nvmlDeviceGetIndex", found), found
    index = index_for(ordinal, os.environ.get("CUDA_VISIBLE_DEVICES"), lambda: _uuids(nv))
    if index is None:
        return None, None
    return index, get(nv, "nvmlDeviceGetHandleByIndex", index)


# ------------------------------------------------------------ facts of one device


def memory(nv: Any, handle: Any) -> tuple[int, int] | None:
    """``(free, total)`` bytes; the v2 struct first (v1 miscounts on drivers >= 515)."""
    v2 = getattr(nv, "nvmlMemory_v2", None)
    info = get(nv, "nvmlDeviceGetMemoryInfo", handle, v2) if v2 is not None else None
    if info is None:
        info = get(nv, "nvmlDeviceGetMemoryInfo", handle)
    return None if info is None else (int(info.free), int(info.total))


def _processes(nv: Any, handle: Any) -> tuple[GpuProcess, ...] | None:
    compute = get(nv, "nvmlDeviceGetComputeRunningProcesses", handle)
    graphics = get(nv, "nvmlDeviceGetGraphicsRunningProcesses", handle)
    if compute is None and graphics is None:
        return None
    found: dict[int, GpuProcess] = {}
    for proc in [*(compute or []), *(graphics or [])]:
        pid = int(proc.pid)
        if pid not in found:
            used = getattr(proc, "usedGpuMemory", None)
            found[pid] = GpuProcess(
                pid=pid,
                name=get(nv, "nvmlSystemGetProcessName", pid),
                used_memory=None if used is None else int(used),
            )
    return tuple(found.values())


def _milliwatts(value: Any) -> float | None:
    return None if value is None else float(value) / 1000.0


def device_fields(nv: Any, handle: Any) -> dict[str, Any]:
    """The ``nvidia-smi`` facts of one device, as ``DeviceInfo`` fields; empty without a handle."""
    if handle is None:
        return {}
    utilization = get(nv, "nvmlDeviceGetUtilizationRates", handle)
    return {
        "utilization": None if utilization is None else int(utilization.gpu),
        "temperature": get(nv, "nvmlDeviceGetTemperature", handle, 0),  # 0: the GPU die
        "power_draw": _milliwatts(get(nv, "nvmlDeviceGetPowerUsage", handle)),
        "power_limit": _milliwatts(get(nv, "nvmlDeviceGetEnforcedPowerLimit", handle)),
        "driver_version": get(nv, "nvmlSystemGetDriverVersion"),
        "processes": _processes(nv, handle),
    }


# ------------------------------------------------------------ the driver


def nvml_status() -> NvmlStatus:
    """What the NVIDIA driver reports through NVML: driver, CUDA driver version, GPUs.

    The same facts as ``nvidia-smi --query-gpu=driver_version,name --format=csv``.
    Degrades to ``error`` (a sentence) on machines without an NVIDIA driver.

    Examples:
        >>> status = nvml_status()
        >>> status.error is None or isinstance(status.error, str)
        True
    """
    with session() as (nv, error):
        if nv is None:
            return NvmlStatus(driver_version=None, cuda_driver_version=None, gpus=(), error=error)
        count = get(nv, "nvmlDeviceGetCount") or 0
        handles = [get(nv, "nvmlDeviceGetHandleByIndex", i) for i in range(count)]
        names = [get(nv, "nvmlDeviceGetName", h) if h is not None else None for h in handles]
        cuda = get(nv, "nvmlSystemGetCudaDriverVersion")
        return NvmlStatus(
            driver_version=get(nv, "nvmlSystemGetDriverVersion"),
            cuda_driver_version=None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}",
            gpus=tuple(str(n or "unknown GPU") for n in names),
            error=None,
        )
