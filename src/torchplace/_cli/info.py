"""Show what this machine has: torch build, devices and memory, and the device "auto" picks.

One screen with what ``nvidia-smi`` and ``python -m torch.utils.collect_env`` would
tell you together; ``--json`` prints the same data, versioned by ``schema_version``.
Memory is shown in GiB (1024**3 bytes); in JSON it is in bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from typing import Any

from torchplace import __version__
from torchplace._devices import (
    TorchBuild,
    auto_choice,
    devices,
    no_gpu_reason,
    nvml_status,
    probe,
    torch_build,
)

__all__ = ["SCHEMA_VERSION", "add_arguments", "collect", "run"]

# Bump when a key changes meaning or disappears; adding keys keeps the version.
SCHEMA_VERSION = 1

_GIB = 1024**3
_BACKENDS = ("gloo", "nccl", "mpi")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register ``torchplace info``'s options."""
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON (memory in bytes)"
    )


def run(args: argparse.Namespace) -> int:
    """Print the report, as a rich screen or as JSON; always exit 0."""
    report = collect()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _render(report)
    return 0


def collect() -> dict[str, Any]:
    """Everything ``torchplace info`` shows, as JSON-ready data.

    torch itself is imported only where a device needs it: not on a build that cannot
    have an accelerator, nor on a CUDA build on a machine without the CUDA driver (the
    build, cuDNN and distributed facts are then read from the files torch installed).

    Returns:
        The report; ``schema_version`` says which layout it follows.

    Examples:
        >>> report = collect()
        >>> report["schema_version"], report["devices"][0]["type"]
        (1, 'cpu')
    """
    build = torch_build()
    try:
        spec, reason = auto_choice()
        auto: dict[str, Any] = {"device": spec, "reason": reason, "error": None}
    except (ValueError, RuntimeError) as e:  # a bad TORCHPLACE_DEVICE: show it, do not fail
        auto = {"device": None, "reason": None, "error": str(e)}
    return {
        "schema_version": SCHEMA_VERSION,
        "torchplace_version": __version__,
        "torch": {**build.to_dict(), "cudnn": _cudnn_version(build)},
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "os": {"name": _os_name(), "kernel": platform.release(), "machine": platform.machine()},
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "torchplace_device": os.environ.get("TORCHPLACE_DEVICE"),
        "nvml": nvml_status().to_dict(),
        "devices": [d.to_dict() for d in devices()],
        "distributed": _distributed(),
        "auto": auto,
        "no_gpu": no_gpu_reason(),
    }


def _os_name() -> str:
    if sys.platform == "darwin":
        return f"macOS {platform.mac_ver()[0]}"
    if sys.platform.startswith("linux"):
        try:
            return platform.freedesktop_os_release().get("PRETTY_NAME", "Linux")
        except OSError:
            return "Linux"
    return f"{platform.system()} {platform.version()}"


def _cudnn_version(build: TorchBuild) -> int | None:
    """cuDNN (MIOpen on ROCm) version torch loads; only GPU builds have one.

    Asks torch when it is imported already; else a pip-installed CUDA torch's cuDNN is
    read from the wheel beside it, sparing the import (a second or more).
    """
    if build.cuda is None and build.hip is None:
        return None
    if build.cuda is not None and "torch" not in sys.modules:
        version = probe.pip_cudnn_version()
        if version is not None:
            return version
    from torch.backends import cudnn

    return cudnn.version() if cudnn.is_available() else None


def _distributed() -> dict[str, Any]:
    """Which ``torch.distributed`` backends this build has.

    Asks ``torch.distributed`` when torch is imported already (a GPU was found); else
    reads the compile definitions the build exported (``USE_C10D_GLOO`` and so on),
    sparing the import of torch.
    """
    definitions = None
    if "torch" not in sys.modules:
        definitions = probe.torch_compile_definitions()
    if definitions is not None:
        flags = {name: f"USE_C10D_{name.upper()}" in definitions for name in _BACKENDS}
        available = "USE_DISTRIBUTED" in definitions
        return {"available": available, **flags, "source": "build definitions"}
    import torch.distributed as dist

    if not dist.is_available():
        return {"available": False, **dict.fromkeys(_BACKENDS, False), "source": "torch"}
    return {
        "available": True,
        "gloo": dist.is_gloo_available(),
        "nccl": dist.is_nccl_available(),
        "mpi": dist.is_mpi_available(),
        "source": "torch",
    }


# ------------------------------------------------------------------ rendering


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / _GIB:.1f}"


def _flag(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _or_dash(value: object, unit: str = "") -> str:
    return "-" if value is None else f"{value}{unit}"


def _build_text(torch: dict[str, Any]) -> str:
    text = f"{torch['version']} ({torch['kind']} build"
    if torch["cudnn"] is not None:
        text += f", cuDNN {torch['cudnn']}"
    return text + ")"


def _driver_text(nvml: dict[str, Any]) -> str:
    if nvml["error"] is not None:
        return f"not available: {nvml['error']}"
    gpus = nvml["gpus"]
    cuda = f" (supports CUDA {nvml['cuda_driver_version']})" if nvml["cuda_driver_version"] else ""
    return f"{nvml['driver_version']}{cuda}; the driver sees {len(gpus)} GPU(s)"


def _distributed_text(dist: dict[str, Any]) -> str:
    if not dist["available"]:
        return "not available in this build"
    return ", ".join(f"{name} {'yes' if dist[name] else 'no'}" for name in _BACKENDS)


def _device_row(d: dict[str, Any]) -> dict[str, str]:
    capability = d["compute_capability"]
    power = None
    if d["power_draw"] is not None:
        limit = f" / {d['power_limit']:.0f}" if d["power_limit"] is not None else ""
        power = f"{d['power_draw']:.0f}{limit}"
    return {
        "device": d["spec"] if d["nvml_index"] is None else f"{d['spec']} (GPU {d['nvml_index']})",
        "name": d["name"] or "-",
        "free / total GiB": f"{_gib(d['free_memory'])} / {_gib(d['total_memory'])}",
        "capability": "-" if capability is None else f"{capability[0]}.{capability[1]}",
        "bf16": _flag(d["bf16"]),
        "TF32": _flag(d["tf32"]),
        "SMs / cores": _or_dash(d["cores"] if d["type"] == "cpu" else d["multiprocessors"]),
        "util": _or_dash(d["utilization"], "%"),
        "temp": _or_dash(d["temperature"], "°C"),
        "power W": _or_dash(power),
    }


def _device_table(found: list[dict[str, Any]]) -> Any:
    """One row per device; a column nobody can answer (all "-") is left out."""
    from rich.table import Table
    from rich.text import Text

    rows = [_device_row(d) for d in found]
    columns = [c for c in rows[0] if c in ("device", "name") or any(r[c] != "-" for r in rows)]
    table = Table(title="Devices (memory in GiB)", title_justify="left")
    for column in columns:
        table.add_column(column, justify="left" if column in ("device", "name") else "right")
    for row in rows:
        table.add_row(*(Text(row[c]) for c in columns))  # Text: names are not markup
    return table


def _process_table(found: list[dict[str, Any]]) -> Any | None:
    from rich.table import Table
    from rich.text import Text

    rows = [(d["spec"], p) for d in found for p in d["processes"] or ()]
    if not rows:
        return None
    table = Table(title="GPU processes", title_justify="left")
    for column in ("device", "pid", "process", "GPU memory GiB"):
        table.add_column(column)
    for spec, p in rows:
        cells = (spec, str(p["pid"]), p["name"] or "-", _gib(p["used_memory"]))
        table.add_row(*(Text(cell) for cell in cells))
    return table


def _render(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    env = Table.grid(padding=(0, 2))
    env.add_column(style="bold")
    env.add_column()
    rows = [
        ("torch", _build_text(report["torch"])),
        ("Python", f"{report['python']['version']} ({report['python']['executable']})"),
        (
            "OS",
            f"{report['os']['name']}, kernel {report['os']['kernel']}, {report['os']['machine']}",
        ),
        ("NVIDIA driver", _driver_text(report["nvml"])),
        ("CUDA_VISIBLE_DEVICES", report["cuda_visible_devices"] or "not set"),
        ("distributed", _distributed_text(report["distributed"])),
    ]
    if report["torchplace_device"] is not None:
        rows.append(("TORCHPLACE_DEVICE", report["torchplace_device"]))
    for key, value in rows:
        env.add_row(key, Text(value))  # Text: no rich markup from names or paths
    console.print(Text(f"torchplace {report['torchplace_version']}", style="bold"))
    console.print(env)
    console.print(_device_table(report["devices"]))
    processes = _process_table(report["devices"])
    if processes is not None:
        console.print(processes)
    if report["no_gpu"] is not None:
        console.print(Text.assemble(("No GPU: ", "bold yellow"), report["no_gpu"]))
    auto = report["auto"]
    if auto["error"] is not None:
        console.print(Text.assemble(('device("auto"): ', "bold red"), auto["error"]))
        return
    reason = auto["reason"]
    if report["no_gpu"] is not None and reason.endswith(report["no_gpu"]):
        reason = "there is no GPU (see above)"
    console.print(
        Text.assemble(('device("auto") -> ', "bold"), (auto["device"], "bold green"), f": {reason}")
    )
