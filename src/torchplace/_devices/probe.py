"""The seams: every question this package asks the machine, one small function each.

Nothing else in ``torchplace._devices`` imports torch or pynvml, dlopens a library or
reads ``/proc``. The modules above call these functions through this module
(``probe.cuda_device_count()``), so a test that patches one attribute here plays a
machine it is not running on: a CUDA build with two A100s, a driver without NVML, a Mac.

Where an answer can be had without importing torch (a second or more on a CUDA build),
it is: the build facts come from the files torch installs, and a CUDA build on a
machine whose CUDA driver library cannot even be loaded sees no device.
"""

from __future__ import annotations

import ast
import ctypes
import importlib.util
import os
import re
import sys
import warnings
from contextlib import suppress
from pathlib import Path
from typing import Any

__all__ = [
    "INSTALL_URL",
    "VERSION_FIELDS",
    "cpu_count",
    "cuda_current_device",
    "cuda_device_count",
    "cuda_driver_loads",
    "cuda_mem_get_info",
    "cuda_properties",
    "mps_available",
    "mps_recommended_max_memory",
    "nvml_close",
    "nvml_open",
    "pip_cudnn_version",
    "read_proc",
    "sysconf_memory",
    "torch_compile_definitions",
    "torch_package_dir",
    "torch_version_fields",
    "xpu_device_count",
    "xpu_mem_get_info",
    "xpu_properties",
]

INSTALL_URL = "https://pytorch.org/get-started/locally/"
VERSION_FIELDS = ("__version__", "cuda", "hip", "xpu", "debug", "git_version")

# The CUDA driver's user-space library, which the CUDA runtime loads by this name.
_CUDA_DRIVER = {"linux": "libcuda.so.1", "win32": "nvcuda.dll"}


# ------------------------------------------------------------ the installed torch


def torch_package_dir() -> Path | None:
    """The directory of the installed ``torch`` package, found without importing it."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def torch_version_fields() -> dict[str, Any]:
    """``torch.version``'s fields, without importing torch when it is not imported yet.

    Raises:
        RuntimeError: torch is not installed.
    """
    loaded = sys.modules.get("torch")
    if loaded is not None and hasattr(loaded, "version"):
        return {k: getattr(loaded.version, k, None) for k in VERSION_FIELDS}
    fields = _parse_torch_version_file()
    if fields is not None:
        return fields
    try:
        import torch.version as version
    except ImportError as e:
        raise RuntimeError(
            f"torch is not installed in this Python ({sys.executable}); install it: {INSTALL_URL}"
        ) from e
    return {k: getattr(version, k, None) for k in VERSION_FIELDS}


def _parse_torch_version_file() -> dict[str, Any] | None:
    """Literal assignments of ``torch/version.py``, or None when it cannot be read."""
    root = torch_package_dir()
    if root is None:
        return None
    try:
        tree = ast.parse((root / "version.py").read_text(encoding="utf-8"))
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
        if isinstance(target, ast.Name) and target.id in VERSION_FIELDS:
            with suppress(ValueError, TypeError, SyntaxError):
                fields[target.id] = ast.literal_eval(value)
    return fields if "__version__" in fields and "cuda" in fields else None


def torch_compile_definitions() -> set[str] | None:
    """Compile definitions torch's build exported to CMake (``USE_DISTRIBUTED``, ...).

    Read from ``torch/share/cmake/Caffe2/Caffe2Targets.cmake``, without importing torch;
    ``None`` when the file is not there.
    """
    root = torch_package_dir()
    if root is None:
        return None
    try:
        text = (root / "share/cmake/Caffe2/Caffe2Targets.cmake").read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.findall(r'INTERFACE_COMPILE_DEFINITIONS "([^"]*)"', text)
    return {d for group in found for d in group.split(";")} or None


def pip_cudnn_version() -> int | None:
    """The cuDNN version a pip-installed CUDA torch loads, as ``cudnn.version()`` says it.

    torch's CUDA wheels for Linux link ``libcudnn.so.<major>`` with an rpath into the
    ``nvidia-cudnn`` wheel beside them (``site-packages/nvidia/cudnn/lib``), which the
    loader searches first. That wheel's ``cudnn_version.h`` says which version it is, in
    the number ``cudnnGetVersion()`` returns (``CUDNN_VERSION``: 92400 for 9.24.0).
    ``None`` where torch is laid out otherwise (conda, Windows, a source build): ask torch.
    """
    root = torch_package_dir()
    if root is None:
        return None
    cudnn = root.parent / "nvidia" / "cudnn"
    try:
        header = (cudnn / "include" / "cudnn_version.h").read_text(encoding="utf-8")
    except OSError:
        return None
    numbers = {
        name: int(value)
        for name, value in re.findall(
            r"^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL)\s+(\d+)\s*$", header, re.MULTILINE
        )
    }
    formula = re.search(
        r"^#define CUDNN_VERSION\s+\(CUDNN_MAJOR \* (\d+) \+ CUDNN_MINOR \* (\d+) "
        r"\+ CUDNN_PATCHLEVEL\)",
        header,
        re.MULTILINE,
    )
    if formula is None or len(numbers) != 3:
        return None
    if not (cudnn / "lib" / f"libcudnn.so.{numbers['MAJOR']}").is_file():
        return None
    major_scale, minor_scale = int(formula.group(1)), int(formula.group(2))
    return numbers["MAJOR"] * major_scale + numbers["MINOR"] * minor_scale + numbers["PATCHLEVEL"]


# ------------------------------------------------------------ accelerators


def cuda_driver_loads() -> bool | None:
    """Whether the CUDA driver library (``libcuda.so.1``, ``nvcuda.dll``) can be loaded.

    The CUDA runtime loads it by that name; where it cannot be loaded, torch sees no
    CUDA device. ``None`` on platforms without a CUDA driver name here (macOS).
    """
    name = _CUDA_DRIVER.get(sys.platform)
    if name is None:
        return None
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def cuda_device_count() -> int:
    """CUDA (or ROCm) devices torch sees.

    0 without importing torch where there can be none: on a build without CUDA or ROCm,
    and on a CUDA build where the CUDA driver library does not load (no NVIDIA driver).
    """
    fields = torch_version_fields()
    if not fields.get("cuda") and not fields.get("hip"):
        return 0
    if fields.get("cuda") and cuda_driver_loads() is False:
        return 0
    import torch

    with warnings.catch_warnings():  # "CUDA initialization: ..." is said better by our errors
        warnings.simplefilter("ignore")
        return int(torch.cuda.device_count())


def cuda_current_device() -> int:
    """The ordinal a bare ``"cuda"`` means: the current device once CUDA is initialised."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return int(torch.cuda.current_device())
    return 0


def cuda_properties(index: int) -> Any:
    """``torch.cuda.get_device_properties(index)`` (initialises CUDA, no memory context)."""
    import torch

    return torch.cuda.get_device_properties(index)


def cuda_mem_get_info(index: int) -> tuple[int, int]:
    """``(free, total)`` bytes from ``torch.cuda.mem_get_info``; creates a CUDA context."""
    import torch

    free, total = torch.cuda.mem_get_info(index)
    return int(free), int(total)


def mps_available() -> bool:
    """Whether Apple MPS can be used (only ever on macOS)."""
    if sys.platform != "darwin":
        return False
    import torch

    return bool(torch.backends.mps.is_available())


def mps_recommended_max_memory() -> int | None:
    """Metal's recommended working-set size in bytes, the practical MPS memory cap."""
    import torch

    fn = getattr(torch.mps, "recommended_max_memory", None)
    return int(fn()) if fn is not None else None


def xpu_device_count() -> int:
    """Intel XPU devices torch sees; 0 without importing torch on builds without XPU."""
    if not torch_version_fields().get("xpu"):
        return 0
    import torch

    return int(torch.xpu.device_count()) if torch.xpu.is_available() else 0


def xpu_properties(index: int) -> Any:
    """``torch.xpu.get_device_properties(index)``."""
    import torch

    return torch.xpu.get_device_properties(index)


def xpu_mem_get_info(index: int) -> tuple[int, int]:
    """``(free, total)`` bytes from ``torch.xpu.mem_get_info``."""
    import torch

    free, total = torch.xpu.mem_get_info(index)
    return int(free), int(total)


# ------------------------------------------------------------ NVML


def nvml_open() -> Any:
    """Import ``pynvml`` (nvidia-ml-py) and initialise NVML; raises without a driver."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def nvml_close(nv: Any) -> None:
    """Release the NVML session opened by ``nvml_open``."""
    with suppress(Exception):
        nv.nvmlShutdown()


# ------------------------------------------------------------ the CPU


def read_proc(name: str) -> str | None:
    """``/proc/<name>`` as text, or None off Linux."""
    try:
        return Path("/proc", name).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def cpu_count() -> int | None:
    """Logical cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def sysconf_memory() -> tuple[int | None, int | None]:
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
