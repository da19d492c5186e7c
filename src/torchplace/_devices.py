"""Discover the devices this process can use, choose one, and explain the choice.

``devices()`` lists the CPU and every CUDA (or ROCm), MPS and XPU device torch can
use, with memory, compute capability, bf16/TF32 support and, where NVML answers, the
``nvidia-smi`` facts: utilisation, temperature, power, driver and processes.
``device(spec)`` turns ``"auto"``, ``"cuda:1"``, ``"gpu"``, ``1`` or a ``torch.device``
into a checked ``torch.device`` and says what to do when the device is not there.

Nothing here imports torch or touches CUDA at import time. On a build that cannot have
an accelerator (``torch.version.cuda``, ``hip`` and ``xpu`` all ``None`` on Linux or
Windows), the build facts are read from ``torch/version.py`` and torch is not imported
at all. Free GPU memory comes from NVML, which needs no CUDA context; only where NVML
does not answer does ``devices()`` fall back to ``torch.cuda.mem_get_info`` (which
creates one). Every hardware query is one small private function so that tests can
patch it.

Examples:
    >>> from torchplace._devices import device, devices
    >>> devices()[0].type  # the CPU is always listed first
    'cpu'
    >>> device("cpu")
    device(type='cpu')
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import numbers
import os
import platform
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = [
    "DeviceInfo",
    "GpuProcess",
    "NvmlStatus",
    "TorchBuild",
    "auto_choice",
    "device",
    "devices",
    "explain_auto",
    "no_gpu_reason",
    "nvml_status",
    "torch_build",
]

_GIB = 1024**3
_ENV_VAR = "TORCHPLACE_DEVICE"
_INSTALL_URL = "https://pytorch.org/get-started/locally/"
_TYPES = ("auto", "cpu", "cuda", "gpu", "mps", "xpu")
_VALID_TEXT = (
    "valid device types are auto, cpu, cuda (alias gpu), mps and xpu, optionally with an "
    "index such as 'cuda:1'; an int is a CUDA ordinal; a torch.device is accepted too"
)
_VERSION_FIELDS = ("__version__", "cuda", "hip", "xpu", "debug", "git_version")


# --------------------------------------------------------------------------- records


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


@dataclass(frozen=True, kw_only=True)
class TorchBuild:
    """Which torch is installed and what it was built for.

    Attributes:
        version: ``torch.__version__``, e.g. ``"2.13.0+cpu"``.
        cuda: CUDA version torch was built with, or ``None``.
        hip: ROCm/HIP version torch was built with, or ``None``.
        xpu: Intel XPU (SYCL) version torch was built with, or ``None``.
        debug: Whether this is a debug build.
        git_version: The commit torch was built from.
        platform: ``sys.platform`` of this process (``"linux"``, ``"darwin"``, ...).

    Examples:
        >>> b = TorchBuild(version="2.13.0+cpu", cuda=None, hip=None, xpu=None,
        ...                debug=False, git_version=None, platform="linux")
        >>> b.kind, b.cpu_only
        ('CPU-only', True)
    """

    version: str
    cuda: str | None
    hip: str | None
    xpu: str | None
    debug: bool
    git_version: str | None
    platform: str

    @property
    def kind(self) -> str:
        """``"CUDA 12.8"``, ``"ROCm 6.4"``, ``"XPU ..."``, ``"CPU + MPS"`` or ``"CPU-only"``."""
        if self.cuda:
            return f"CUDA {self.cuda}"
        if self.hip:
            return f"ROCm {self.hip}"
        if self.xpu:
            return f"XPU {self.xpu}"
        return "CPU + MPS" if self.platform == "darwin" else "CPU-only"

    @property
    def cpu_only(self) -> bool:
        """True when this build cannot use any accelerator on this platform."""
        return self.kind == "CPU-only"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data: every field plus ``kind``."""
        return {**asdict(self), "kind": self.kind}


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


# ------------------------------------------------------------ seams: torch build


def _torch_version_fields() -> dict[str, Any]:
    """``torch.version``'s fields, without importing torch when it is not imported yet."""
    loaded = sys.modules.get("torch")
    if loaded is not None and hasattr(loaded, "version"):
        return {k: getattr(loaded.version, k, None) for k in _VERSION_FIELDS}
    fields = _parse_torch_version_file()
    if fields is not None:
        return fields
    try:
        import torch.version as version
    except ImportError as e:
        raise RuntimeError(
            f"torch is not installed in this Python ({sys.executable}); install it: {_INSTALL_URL}"
        ) from e
    return {k: getattr(version, k, None) for k in _VERSION_FIELDS}


def _parse_torch_version_file() -> dict[str, Any] | None:
    """Literal assignments of ``torch/version.py``, or None when it cannot be read."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    fields: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in _VERSION_FIELDS:
            with suppress(ValueError, TypeError, SyntaxError):
                fields[target.id] = ast.literal_eval(value)
    return fields if "__version__" in fields and "cuda" in fields else None


def torch_build() -> TorchBuild:
    """Which torch is installed, read without importing torch when possible.

    Returns:
        The build record (version, CUDA/ROCm/XPU versions, platform).

    Raises:
        RuntimeError: torch is not installed.

    Examples:
        >>> import torch
        >>> torch_build().version == torch.__version__
        True
    """
    f = _torch_version_fields()
    return TorchBuild(
        version=str(f.get("__version__")),
        cuda=f.get("cuda") or None,
        hip=f.get("hip") or None,
        xpu=f.get("xpu") or None,
        debug=bool(f.get("debug")),
        git_version=f.get("git_version"),
        platform=sys.platform,
    )


# ------------------------------------------------------------ seams: accelerators


def _cuda_device_count() -> int:
    """CUDA (or ROCm) devices torch sees; 0 without importing torch on builds without them."""
    build = torch_build()
    if build.cuda is None and build.hip is None:
        return 0
    import torch

    with warnings.catch_warnings():  # "CUDA initialization: ..." is said better by our errors
        warnings.simplefilter("ignore")
        return int(torch.cuda.device_count())


def _cuda_current_device() -> int:
    """The ordinal a bare ``"cuda"`` means: the current device once CUDA is initialised."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return int(torch.cuda.current_device())
    return 0


def _cuda_properties(index: int) -> Any:
    """``torch.cuda.get_device_properties(index)`` (initialises CUDA, no memory context)."""
    import torch

    return torch.cuda.get_device_properties(index)


def _cuda_mem_get_info(index: int) -> tuple[int, int]:
    """``(free, total)`` bytes from ``torch.cuda.mem_get_info``; creates a CUDA context."""
    import torch

    free, total = torch.cuda.mem_get_info(index)
    return int(free), int(total)


def _mps_available() -> bool:
    """Whether Apple MPS can be used (only ever on macOS)."""
    if sys.platform != "darwin":
        return False
    import torch

    return bool(torch.backends.mps.is_available())


def _mps_recommended_max_memory() -> int | None:
    """Metal's recommended working-set size in bytes, the practical MPS memory cap."""
    import torch

    fn = getattr(torch.mps, "recommended_max_memory", None)
    return int(fn()) if fn is not None else None


def _xpu_device_count() -> int:
    """Intel XPU devices torch sees; 0 without importing torch on builds without XPU."""
    if torch_build().xpu is None:
        return 0
    import torch

    return int(torch.xpu.device_count()) if torch.xpu.is_available() else 0


def _xpu_properties(index: int) -> Any:
    """``torch.xpu.get_device_properties(index)``."""
    import torch

    return torch.xpu.get_device_properties(index)


def _xpu_mem_get_info(index: int) -> tuple[int, int]:
    """``(free, total)`` bytes from ``torch.xpu.mem_get_info``."""
    import torch

    free, total = torch.xpu.mem_get_info(index)
    return int(free), int(total)


# ------------------------------------------------------------ seams: NVML


def _nvml_open() -> Any:
    """Import ``pynvml`` (nvidia-ml-py) and initialise NVML; raises without a driver."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _nvml_close(nv: Any) -> None:
    """Release the NVML session opened by ``_nvml_open``."""
    with suppress(Exception):
        nv.nvmlShutdown()


_NVML_HINTS = {
    "NVMLError_LibraryNotFound": "no NVIDIA driver is installed on this machine",
    "NVMLError_DriverNotLoaded": "the NVIDIA driver is not loaded; check `nvidia-smi`",
    "NVMLError_LibRmVersionMismatch": (
        "the NVIDIA driver and its library differ in version; reboot or reload the "
        "nvidia kernel module"
    ),
    "NVMLError_NoPermission": "this user may not query the NVIDIA driver",
}


def _nvml_reason(error: Exception) -> str:
    if isinstance(error, ImportError):
        return "the nvidia-ml-py package is not installed: pip install nvidia-ml-py"
    hint = _NVML_HINTS.get(type(error).__name__)
    return f"{error} ({hint})" if hint else f"NVML failed: {error}"


@contextmanager
def _nvml_session() -> Iterator[tuple[Any | None, str | None]]:
    """Yield ``(pynvml, None)`` with NVML initialised, or ``(None, reason)``."""
    nv: Any | None = None
    reason: str | None = None
    try:
        nv = _nvml_open()
    except Exception as e:  # any NVML or loader failure means "no NVML", never a crash
        reason = _nvml_reason(e)
    try:
        yield nv, reason
    finally:
        if nv is not None:
            _nvml_close(nv)


def _nvml_get(nv: Any, function: str, *args: Any) -> Any:
    """Call one NVML function; ``None`` when it raises or is missing from the bindings."""
    try:
        value = getattr(nv, function)(*args)
    except Exception:  # NVMLError_NotSupported, old drivers, old bindings, ...
        return None
    return value.decode() if isinstance(value, bytes) else value


# ------------------------------------------------------------ seams: the CPU


def _read_proc(name: str) -> str | None:
    """``/proc/<name>`` as text, or None off Linux."""
    try:
        return Path("/proc", name).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _cpu_count() -> int | None:
    """Logical cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def _sysconf_memory() -> tuple[int | None, int | None]:
    """``(total, available)`` RAM bytes from ``os.sysconf`` where /proc is missing."""
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        total = page * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None, None
    try:
        return total, page * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError):
        return total, None


# ------------------------------------------------------------ building records


def _cpu_field(cpuinfo: str, key: str) -> str | None:
    match = re.search(rf"^{key}\s*:\s*(.*)$", cpuinfo, re.MULTILINE)
    return match.group(1).strip() if match else None


def _meminfo_bytes(meminfo: str, key: str) -> int | None:
    match = re.search(rf"^{key}:\s*(\d+)\s*kB", meminfo, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def _cpu_info() -> DeviceInfo:
    cpuinfo = _read_proc("cpuinfo") or ""
    name = _cpu_field(cpuinfo, "model name") or platform.processor() or platform.machine()
    flags_line = _cpu_field(cpuinfo, "flags") or _cpu_field(cpuinfo, "Features")
    bf16 = None
    if flags_line is not None:
        bf16 = bool({"avx512_bf16", "amx_bf16", "bf16"} & set(flags_line.split()))
    meminfo = _read_proc("meminfo")
    if meminfo is not None:
        total = _meminfo_bytes(meminfo, "MemTotal")
        free = _meminfo_bytes(meminfo, "MemAvailable")
    else:
        total, free = _sysconf_memory()
    return DeviceInfo(
        type="cpu",
        name=name or None,
        total_memory=total,
        free_memory=free,
        memory_source="os" if free is not None else None,
        bf16=bf16,
        cores=_cpu_count(),
    )


def _parse_visible(value: str | None) -> list[int | str] | None:
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


def _nvml_index_for(
    ordinal: int, visible: str | None, uuids: Callable[[], list[str]]
) -> int | None:
    """The NVML index of torch's ``cuda:<ordinal>`` given ``CUDA_VISIBLE_DEVICES``."""
    entries = _parse_visible(visible)
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


def _nvml_uuids(nv: Any) -> list[str]:
    count = _nvml_get(nv, "nvmlDeviceGetCount") or 0
    handles = [_nvml_get(nv, "nvmlDeviceGetHandleByIndex", i) for i in range(count)]
    return [str(_nvml_get(nv, "nvmlDeviceGetUUID", h) or "") for h in handles]


def _nvml_handle(nv: Any, ordinal: int, uuid: str | None) -> tuple[int | None, Any]:
    """``(nvml_index, handle)`` of ``cuda:<ordinal>``: by UUID, else by CUDA_VISIBLE_DEVICES."""
    if uuid:
        handle = _nvml_get(nv, "nvmlDeviceGetHandleByUUID", uuid)
        if handle is not None:
            return _nvml_get(nv, "nvmlDeviceGetIndex", handle), handle
    index = _nvml_index_for(
        ordinal, os.environ.get("CUDA_VISIBLE_DEVICES"), lambda: _nvml_uuids(nv)
    )
    if index is None:
        return None, None
    return index, _nvml_get(nv, "nvmlDeviceGetHandleByIndex", index)


def _nvml_memory(nv: Any, handle: Any) -> tuple[int, int] | None:
    """``(free, total)`` bytes; the v2 struct first (v1 miscounts on drivers >= 515)."""
    v2 = getattr(nv, "nvmlMemory_v2", None)
    memory = _nvml_get(nv, "nvmlDeviceGetMemoryInfo", handle, v2) if v2 is not None else None
    if memory is None:
        memory = _nvml_get(nv, "nvmlDeviceGetMemoryInfo", handle)
    return None if memory is None else (int(memory.free), int(memory.total))


def _nvml_processes(nv: Any, handle: Any) -> tuple[GpuProcess, ...] | None:
    compute = _nvml_get(nv, "nvmlDeviceGetComputeRunningProcesses", handle)
    graphics = _nvml_get(nv, "nvmlDeviceGetGraphicsRunningProcesses", handle)
    if compute is None and graphics is None:
        return None
    found: dict[int, GpuProcess] = {}
    for proc in [*(compute or []), *(graphics or [])]:
        pid = int(proc.pid)
        if pid not in found:
            used = getattr(proc, "usedGpuMemory", None)
            found[pid] = GpuProcess(
                pid=pid,
                name=_nvml_get(nv, "nvmlSystemGetProcessName", pid),
                used_memory=None if used is None else int(used),
            )
    return tuple(found.values())


def _milliwatts(value: Any) -> float | None:
    return None if value is None else float(value) / 1000.0


def _try(query: Callable[..., Any], *args: Any) -> Any:
    """A backend query that may fail on a broken setup; its failure means "unknown"."""
    try:
        return query(*args)
    except Exception:
        return None


def _cuda_uuid(props: Any) -> str | None:
    uuid = getattr(props, "uuid", None)
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def _nvml_fields(nv: Any, handle: Any) -> dict[str, Any]:
    """The ``nvidia-smi`` facts of one device; empty when NVML has no handle for it."""
    if handle is None:
        return {}
    utilization = _nvml_get(nv, "nvmlDeviceGetUtilizationRates", handle)
    return {
        "utilization": None if utilization is None else int(utilization.gpu),
        "temperature": _nvml_get(nv, "nvmlDeviceGetTemperature", handle, 0),  # 0: the GPU die
        "power_draw": _milliwatts(_nvml_get(nv, "nvmlDeviceGetPowerUsage", handle)),
        "power_limit": _milliwatts(_nvml_get(nv, "nvmlDeviceGetEnforcedPowerLimit", handle)),
        "driver_version": _nvml_get(nv, "nvmlSystemGetDriverVersion"),
        "processes": _nvml_processes(nv, handle),
    }


def _cuda_info(index: int, nv: Any | None, *, rocm: bool) -> DeviceInfo:
    props = _try(_cuda_properties, index)
    capability = None if props is None else (int(props.major), int(props.minor))
    uuid = None if rocm else _cuda_uuid(props)
    nvml_index, handle = (None, None) if nv is None else _nvml_handle(nv, index, uuid)
    memory = None if handle is None else _nvml_memory(nv, handle)
    source = "nvml" if memory else None
    if memory is None:
        memory = _try(_cuda_mem_get_info, index)
        source = "torch" if memory else None
    total = getattr(props, "total_memory", None)
    if total is None and memory is not None:
        total = memory[1]
    name = getattr(props, "name", None)
    if name is None and handle is not None:
        name = _nvml_get(nv, "nvmlDeviceGetName", handle)
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
        **_nvml_fields(nv, handle),
    )


def _mps_info() -> DeviceInfo:
    # torch exposes no name, capability or free memory for MPS (unified memory).
    return DeviceInfo(type="mps", index=0, total_memory=_try(_mps_recommended_max_memory))


def _xpu_info(index: int) -> DeviceInfo:
    props = _try(_xpu_properties, index)
    memory = _try(_xpu_mem_get_info, index)
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
    count = _cuda_device_count()
    if count:
        rocm = torch_build().hip is not None
        with _nvml_session() as (nv, _):
            found += [_cuda_info(i, nv, rocm=rocm) for i in range(count)]
    if _mps_available():
        found.append(_mps_info())
    found += [_xpu_info(i) for i in range(_xpu_device_count())]
    return found


def nvml_status() -> NvmlStatus:
    """What the NVIDIA driver reports through NVML: driver, CUDA driver version, GPUs.

    Degrades to ``error`` (a sentence) on machines without an NVIDIA driver.

    Examples:
        >>> status = nvml_status()
        >>> status.error is None or isinstance(status.error, str)
        True
    """
    with _nvml_session() as (nv, error):
        if nv is None:
            return NvmlStatus(driver_version=None, cuda_driver_version=None, gpus=(), error=error)
        count = _nvml_get(nv, "nvmlDeviceGetCount") or 0
        handles = [_nvml_get(nv, "nvmlDeviceGetHandleByIndex", i) for i in range(count)]
        names = [_nvml_get(nv, "nvmlDeviceGetName", h) if h is not None else None for h in handles]
        cuda = _nvml_get(nv, "nvmlSystemGetCudaDriverVersion")
        return NvmlStatus(
            driver_version=_nvml_get(nv, "nvmlSystemGetDriverVersion"),
            cuda_driver_version=None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}",
            gpus=tuple(str(n or "unknown GPU") for n in names),
            error=None,
        )


# ------------------------------------------------------------ choosing a device


def _visible_text() -> str:
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "CUDA_VISIBLE_DEVICES is not set" if value is None else f"CUDA_VISIBLE_DEVICES={value}"


def _no_cuda_reason() -> str:
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
            f"install a CUDA build: {_INSTALL_URL}"
        )
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        fix = f"CUDA_VISIBLE_DEVICES={visible!r} may hide every GPU; unset it or list valid indices"
    else:
        error = nvml_status().error if build.cuda else None
        fix = "check that `nvidia-smi` (or `rocm-smi`) lists a GPU and that the driver is loaded"
        fix += f" (NVML: {error})" if error else ""
    return f"torch {build.version} is a {build.kind} build but sees no GPU; {fix}"


def _no_mps_reason() -> str:
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
    if _cuda_device_count() or _mps_available() or _xpu_device_count():
        return None
    if sys.platform == "darwin" and torch_build().cuda is None:
        return _no_mps_reason()
    return _no_cuda_reason()


def _unknown_type(what: str, kind: str) -> ValueError:
    close = difflib.get_close_matches(kind, _TYPES, n=1)
    guess = f"; did you mean {close[0]!r}?" if close else ""
    return ValueError(f"{what}: unknown device type {kind!r}{guess} ({_VALID_TEXT})")


def _parse(spec: object, what: str) -> tuple[str, int | None]:
    """``(type, index)`` of a spec, checked for form only; ``gpu`` becomes ``cuda``."""
    torch = sys.modules.get("torch")
    if isinstance(spec, bool):
        raise ValueError(f"{what}: a bool is not a device ({_VALID_TEXT})")
    if isinstance(spec, numbers.Integral):
        if int(spec) < 0:
            raise ValueError(f"{what}: a device index must be >= 0, got {int(spec)}")
        return "cuda", int(spec)
    if torch is not None and isinstance(spec, torch.device):
        text = str(spec)
    elif isinstance(spec, str):
        text = spec.strip().lower()
    else:
        raise ValueError(
            f"{what}: expected a string, an int or a torch.device, got {type(spec).__name__}"
        )
    if not text:
        raise ValueError(f"{what}: the device is empty ({_VALID_TEXT})")
    kind, colon, index = text.partition(":")
    kind = "cuda" if kind == "gpu" else kind
    if kind not in _TYPES:
        raise _unknown_type(what, kind)
    if not colon:
        return kind, None
    if kind == "auto":
        raise ValueError(f"{what}: 'auto' takes no index; use 'auto' or e.g. 'cuda:1'")
    if index.startswith("-") and index[1:].isdecimal():
        raise ValueError(f"{what}: a device index must be >= 0, got {index}")
    if not (index.isascii() and index.isdecimal()):
        raise ValueError(
            f"{what}: the index {index!r} is not a non-negative integer; write e.g. '{kind}:0'"
        )
    return kind, int(index)


def _check(kind: str, index: int | None, what: str) -> str:
    """The canonical spec (``"cuda:1"``, ``"cpu"``, ...) once the device is known to exist."""
    if kind == "cpu":
        if index not in (None, 0):
            raise ValueError(f"{what}: there is one CPU device; use 'cpu'")
        return "cpu"
    if kind == "mps":
        if not _mps_available():
            raise RuntimeError(f"{what} requested but MPS is not available: {_no_mps_reason()}")
        if index not in (None, 0):
            raise ValueError(f"{what}: there is one MPS device; use 'mps'")
        return "mps:0"
    if kind == "xpu":
        count = _xpu_device_count()
        if count == 0:
            build = torch_build()
            raise RuntimeError(
                f"{what} requested but no Intel XPU is available: torch {build.version} "
                f"({build.kind} build) sees no XPU device; for Intel GPUs install an XPU build: "
                f"{_INSTALL_URL}"
            )
        chosen = 0 if index is None else index
        if chosen >= count:
            raise ValueError(
                f"{what} requested but {count} XPU device(s) are visible; use an index from "
                f"0 to {count - 1}"
            )
        return f"xpu:{chosen}"
    count = _cuda_device_count()
    if count == 0:
        raise RuntimeError(f"{what} requested but no CUDA device can be used: {_no_cuda_reason()}")
    chosen = _cuda_current_device() if index is None else index
    if chosen >= count:
        devices_text = f"{count} CUDA device{'s are' if count != 1 else ' is'} visible"
        message = (
            f"cuda:{chosen} requested but {devices_text} ({_visible_text()}); "
            f"use an index from 0 to {count - 1}"
        )
        visible = _parse_visible(os.environ.get("CUDA_VISIBLE_DEVICES"))
        if visible:
            message += (
                f". torch numbers the visible devices from 0: physical GPU {visible[0]} is cuda:0"
            )
        if what.startswith(_ENV_VAR):
            message = f"{what}: {message}"
        raise ValueError(message)
    return f"cuda:{chosen}"


def _describe(spec: object) -> str:
    """How an error names the spec the user passed."""
    if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
        return f"CUDA ordinal {spec}"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(spec, torch.device):
        return repr(str(spec))
    return repr(spec)


def _resolve(spec: object, what: str) -> str:
    kind, index = _parse(spec, what)
    if kind == "auto":
        return auto_choice()[0]
    return _check(kind, index, what)


def _most_free_cuda(count: int) -> tuple[str, str]:
    with _nvml_session() as (nv, error):
        free: list[int] = []
        for i in range(count):
            props = _try(_cuda_properties, i)
            handle = None if nv is None else _nvml_handle(nv, i, _cuda_uuid(props))[1]
            memory = None if handle is None else _nvml_memory(nv, handle)
            if memory is not None:
                free.append(memory[0])
    if len(free) < count:
        why = error or "NVML did not report free memory for every device"
        return "cuda:0", (
            f"cuda:0 is the first of {count} visible CUDA devices; their free memory is unknown "
            f"({why}), so none could be preferred"
        )
    best = max(range(count), key=lambda i: (free[i], -i))
    others = ", ".join(f"cuda:{i} {free[i] / _GIB:.1f}" for i in range(count) if i != best)
    return f"cuda:{best}", (
        f"cuda:{best} has the most free memory of the {count} visible CUDA devices "
        f"({free[best] / _GIB:.1f} GiB free; {others} GiB)"
    )


def auto_choice() -> tuple[str, str]:
    """What ``device("auto")`` picks, as a spec string, and why, in one sentence.

    The order: ``TORCHPLACE_DEVICE`` when set (checked like any spec); else the CUDA
    device with the most free memory (NVML; the first one when NVML cannot say); else
    MPS; else the first XPU; else the CPU. On a build that cannot have an accelerator
    this does not import torch.

    Returns:
        ``(spec, reason)``, e.g. ``("cuda:1", "cuda:1 has the most free memory ...")``.

    Raises:
        ValueError: ``TORCHPLACE_DEVICE`` is not a valid device spec.
        RuntimeError: ``TORCHPLACE_DEVICE`` names a device that is not there.

    Examples:
        >>> spec, reason = auto_choice()
        >>> spec in {"cpu", "mps:0"} or spec.startswith(("cuda:", "xpu:"))
        True
    """
    env = os.environ.get(_ENV_VAR, "").strip()
    if env and env.lower() != "auto":
        what = f"{_ENV_VAR}={env!r}"
        kind, index = _parse(env, what)
        return _check(kind, index, what), f"{_ENV_VAR}={env} overrides auto"
    count = _cuda_device_count()
    if count == 1:
        return "cuda:0", "cuda:0 is the only visible CUDA device"
    if count > 1:
        return _most_free_cuda(count)
    if _mps_available():
        return "mps:0", "no CUDA device is visible and Apple MPS is available"
    if _xpu_device_count():
        return "xpu:0", "no CUDA or MPS device is visible and an Intel XPU is"
    return "cpu", f"no GPU: {no_gpu_reason()}"


def explain_auto() -> tuple[torch.device, str]:
    """The device ``device("auto")`` returns and the reason for it.

    Returns:
        ``(torch.device, reason sentence)``.

    Examples:
        >>> chosen, reason = explain_auto()
        >>> chosen == device("auto") and isinstance(reason, str)
        True
    """
    import torch

    spec, reason = auto_choice()
    return torch.device(spec), reason


def device(spec: str | int | torch.device = "auto") -> torch.device:
    """A checked ``torch.device`` from a friendly spec.

    Args:
        spec: ``"auto"`` (the best accelerator, see ``auto_choice``; the environment
            variable ``TORCHPLACE_DEVICE`` overrides it), ``"cpu"``, ``"cuda"``,
            ``"cuda:1"``, ``"gpu"`` (alias of ``cuda``), ``"mps"``, ``"xpu"``, an int
            (a CUDA ordinal) or a ``torch.device``. Case and surrounding spaces do not
            matter. A bare ``"cuda"`` means the current CUDA device, with its index.

    Returns:
        The device, with an explicit index for accelerators (``cuda:0``, not ``cuda``).

    Raises:
        ValueError: The spec is malformed, names an unknown type (the message suggests
            the close one) or an index beyond the visible devices.
        RuntimeError: The requested kind of accelerator is not available here; the
            message says why (e.g. a CPU-only torch build) and what to install.

    Examples:
        >>> device("cpu")
        device(type='cpu')
        >>> device(" CPU ")
        device(type='cpu')
        >>> device("cdua")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: 'cdua': unknown device type 'cdua'; did you mean 'cuda'? ...
    """
    import torch

    return torch.device(_resolve(spec, _describe(spec)))
