"""The GPU catalog: memory, bandwidth, dense peak FLOP/s and host link of common GPUs.

The figures live in a data file shipped with the package (``torchplace/data/gpus.toml``),
one row per GPU model with the source of every figure next to it. The file is read
once, validated, and turned into frozen :class:`GPUSpec` records. Nothing here talks
to hardware: the catalog is what the simulator and the roofline use to describe a GPU
that may not be in the machine.

Units: bytes, bytes per second and FLOP/s (dense, no sparsity). ``memory_bytes`` is the
marketed memory (in binary GiB, which is what GPU "GB" are), ``torch_total_bytes`` what
``torch.cuda.get_device_properties(i).total_memory`` reports, which is less.

Examples:
    >>> from torchplace import catalog
    >>> spec = catalog.lookup("H100")
    >>> spec.key, spec.torch_name
    ('h100-sxm-80gb', 'NVIDIA H100 80GB HBM3')
    >>> spec.peak_flops["bf16"] / 1e12
    989.4
    >>> catalog.lookup("nvidia a100-sxm4-80gb").key
    'a100-sxm-80gb'
    >>> catalog.lookup("Tesla T4").bf16
    False
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

if TYPE_CHECKING:
    import torch

__all__ = ["DEFAULT_GPU", "GPUSpec", "gpus", "lookup"]

DEFAULT_GPU = "h100-sxm-80gb"
"""The catalog key used when a GPU is needed and none is named."""

_GIB = 1024**3
_FLOPS_KEYS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
# figures every row carries, each of which needs a source
_FIGURES = (
    "torch_name",
    "memory_bytes",
    "torch_total_bytes",
    "bandwidth_bytes_per_s",
    "host_link",
    "host_bandwidth_bytes_per_s",
    "multiprocessor_count",
    "bf16",
)
_ROW_FIELDS = frozenset(
    {
        "key",
        "name",
        "torch_name",
        "aliases",
        "vendor",
        "compute_capability",
        "gcn_arch",
        "memory_gib",
        "torch_total_gib",
        "bandwidth_bytes_per_s",
        "host_link",
        "host_bandwidth_bytes_per_s",
        "multiprocessor_count",
        "bf16",
        "uncertain",
        "peak_flops",
        "sources",
    }
)
# words a name may start with that do not tell GPUs apart ("NVIDIA GeForce RTX 4090")
_VENDOR_WORDS = ("nvidia", "amd", "tesla", "geforce", "instinct")
_KEY_PATTERN = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


@dataclass(frozen=True)
class GPUSpec:
    """Specification of one GPU model, as catalogued in ``torchplace/data/gpus.toml``.

    Attributes:
        key: Catalog key, e.g. ``"h100-sxm-80gb"``.
        name: Display name.
        torch_name: What ``torch.cuda.get_device_name()`` reports for this GPU.
        aliases: Other names :func:`lookup` accepts.
        vendor: ``"nvidia"`` or ``"amd"``.
        compute_capability: CUDA compute capability ``(major, minor)``; ``None`` on AMD.
        memory_bytes: Marketed memory in bytes (binary: "80 GB" is 80 GiB).
        torch_total_bytes: Total memory torch reports (lower than ``memory_bytes``;
            the lowest observed value where observations vary).
        bandwidth_bytes_per_s: Peak memory bandwidth.
        peak_flops: Dense peak FLOP/s per dtype key (``"fp64"``, ``"fp32"``, ``"tf32"``,
            ``"bf16"``, ``"fp16"``, ``"fp8"``); a missing key means not supported (or,
            for ``"fp64"``, not catalogued).
        host_link: Host connection, e.g. ``"PCIe 5.0 x16; NVLink 900 GB/s"``.
        host_bandwidth_bytes_per_s: Host-to-device bandwidth per direction.
        multiprocessor_count: Streaming multiprocessors (NVIDIA) or compute units (AMD).
        bf16: Whether the GPU computes in bfloat16 natively.
        uncertain: Names of the figures the sources mark as unverified (peak FLOP/s
            entries as ``"peak_flops.<dtype>"``).
        sources: Figure name -> where the figure comes from.
        gcn_arch: AMD architecture name (``props.gcnArchName``, e.g. ``"gfx942"``).
    """

    key: str
    name: str
    torch_name: str
    aliases: tuple[str, ...]
    vendor: str
    compute_capability: tuple[int, int] | None
    memory_bytes: int
    torch_total_bytes: int
    bandwidth_bytes_per_s: float
    peak_flops: Mapping[str, float]
    host_link: str
    host_bandwidth_bytes_per_s: float
    multiprocessor_count: int
    bf16: bool
    uncertain: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)
    gcn_arch: str | None = None

    def __hash__(self) -> int:
        return hash(self.key)

    def peak_flops_for(self, dtype: torch.dtype, *, tf32: bool = False) -> float | None:
        """Dense peak FLOP/s for matrix math in ``dtype``, or ``None`` if not catalogued.

        Args:
            dtype: ``torch.float32``, ``torch.float16``, ``torch.bfloat16``,
                ``torch.float64`` or a float8 dtype.
            tf32: Whether float32 matmuls may use TF32 tensor cores (as with
                ``torch.backends.cuda.matmul.allow_tf32 = True``). GPUs without TF32
                run float32 at the fp32 rate either way.

        Returns:
            FLOP/s, or ``None`` when the GPU lacks the dtype (bfloat16 on a T4, float8
            before Ada/Hopper) or the catalog has no figure for it.

        Raises:
            ValueError: If ``dtype`` is not a ``torch.dtype``.

        Examples:
            >>> import torch
            >>> from torchplace import catalog
            >>> a100 = catalog.lookup("A100")
            >>> a100.peak_flops_for(torch.float32) / 1e12
            19.5
            >>> a100.peak_flops_for(torch.float32, tf32=True) / 1e12
            156.0
            >>> print(catalog.lookup("T4").peak_flops_for(torch.bfloat16))
            None
        """
        import torch

        if not isinstance(dtype, torch.dtype):
            raise ValueError(
                f"peak_flops_for expects a torch.dtype such as torch.bfloat16, got {dtype!r}."
            )
        if dtype == torch.float32:
            if tf32 and "tf32" in self.peak_flops:
                return self.peak_flops["tf32"]
            return self.peak_flops.get("fp32")
        key = _dtype_keys().get(dtype)
        return None if key is None else self.peak_flops.get(key)

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain JSON-ready values (lists for tuples, dicts for mappings).

        Examples:
            >>> from torchplace import catalog
            >>> d = catalog.lookup("l4").to_dict()
            >>> d["key"], d["compute_capability"], d["peak_flops"]["fp8"] / 1e12
            ('l4', [8, 9], 242.5)
        """
        return {
            "key": self.key,
            "name": self.name,
            "torch_name": self.torch_name,
            "aliases": list(self.aliases),
            "vendor": self.vendor,
            "compute_capability": (
                None if self.compute_capability is None else list(self.compute_capability)
            ),
            "gcn_arch": self.gcn_arch,
            "memory_bytes": self.memory_bytes,
            "torch_total_bytes": self.torch_total_bytes,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "peak_flops": dict(self.peak_flops),
            "host_link": self.host_link,
            "host_bandwidth_bytes_per_s": self.host_bandwidth_bytes_per_s,
            "multiprocessor_count": self.multiprocessor_count,
            "bf16": self.bf16,
            "uncertain": list(self.uncertain),
            "sources": dict(self.sources),
        }


def gpus() -> tuple[GPUSpec, ...]:
    """Every GPU in the catalog, in the order of the data file.

    Raises:
        RuntimeError: If the installed data file is missing or invalid.

    Examples:
        >>> from torchplace import catalog
        >>> "h100-sxm-80gb" in [g.key for g in catalog.gpus()]
        True
    """
    return _load()


def lookup(name: str) -> GPUSpec:
    """Find a GPU by key, display name, alias or the name torch reports.

    Matching ignores case, spaces, hyphens and underscores, and a leading "NVIDIA",
    "AMD", "Tesla", "GeForce" or "Instinct": ``"H100"``, ``"h100"``, ``"a100-80gb"``,
    ``"rtx4090"`` and ``"NVIDIA H100 80GB HBM3"`` (what ``get_device_name`` says) all
    match. Short names that fit several models pick a documented default:

    - ``"H100"`` -> H100 SXM5 80GB (``"H100 PCIe"``, ``"H100 NVL"`` for the others),
    - ``"A100"``, ``"A100 80GB"`` -> A100 SXM4 80GB; ``"A100 40GB"`` -> A100 SXM4 40GB;
      ``"A100 PCIe"`` -> A100 PCIe 80GB,
    - ``"V100"`` -> V100 SXM2 32GB.

    Args:
        name: The name to look up.

    Returns:
        The matching :class:`GPUSpec`.

    Raises:
        ValueError: If no GPU matches; the message lists the catalog keys and the
            nearest match.

    Examples:
        >>> from torchplace import catalog
        >>> catalog.lookup("rtx4090").name
        'NVIDIA GeForce RTX 4090'
        >>> catalog.lookup("V100").key
        'v100-sxm2-32gb'
    """
    if not isinstance(name, str):
        raise ValueError(f"A GPU name must be a string such as 'H100', got {name!r}.")
    index = _index()
    normalized = _normalize(name)
    for candidate in (normalized, _strip_vendor(normalized)):
        if candidate in index:
            return index[candidate]
    keys = ", ".join(spec.key for spec in _load())
    close = difflib.get_close_matches(_strip_vendor(normalized), list(index), n=1, cutoff=0.5)
    hint = f" Did you mean {index[close[0]].key!r}?" if close else ""
    raise ValueError(
        f"Unknown GPU {name!r}.{hint} The catalog has: {keys}. Pass one of these keys, an "
        "alias such as 'H100' or 'A100 40GB', or the name torch.cuda.get_device_name() "
        "reports."
    )


def _normalize(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", text.lower())


def _strip_vendor(normalized: str) -> str:
    stripped = True
    while stripped:
        stripped = False
        for word in _VENDOR_WORDS:
            if normalized.startswith(word) and len(normalized) > len(word):
                normalized = normalized[len(word) :]
                stripped = True
    return normalized


@functools.cache
def _dtype_keys() -> dict[torch.dtype, str]:
    import torch

    keys = {torch.float64: "fp64", torch.float16: "fp16", torch.bfloat16: "bf16"}
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
        dtype = getattr(torch, name, None)
        if isinstance(dtype, torch.dtype):
            keys[dtype] = "fp8"
    return keys


@functools.cache
def _load() -> tuple[GPUSpec, ...]:
    resource = resources.files("torchplace") / "data" / "gpus.toml"
    try:
        document = tomllib.loads(resource.read_text(encoding="utf-8"))
        return _parse_catalog(document)
    except (OSError, tomllib.TOMLDecodeError, ValueError) as e:
        raise RuntimeError(
            f"torchplace's GPU catalog ({resource}) could not be read: {e} "
            "Reinstall torchplace (pip install --force-reinstall torchplace)."
        ) from e


@functools.cache
def _index() -> dict[str, GPUSpec]:
    return _build_index(_load())


def _names(spec: GPUSpec) -> set[str]:
    names = set()
    for text in (spec.key, spec.name, spec.torch_name, *spec.aliases):
        normalized = _normalize(text)
        names.update({normalized, _strip_vendor(normalized)})
    return names


def _build_index(specs: tuple[GPUSpec, ...]) -> dict[str, GPUSpec]:
    index: dict[str, GPUSpec] = {}
    for spec in specs:
        for name in _names(spec):
            other = index.setdefault(name, spec)
            if other is not spec:
                raise ValueError(
                    f"GPU rows {other.key!r} and {spec.key!r} both answer to the name "
                    f"{name!r}; give each alias to one row only."
                )
    return index


def _parse_catalog(document: Mapping[str, Any]) -> tuple[GPUSpec, ...]:
    """Turn the parsed TOML document into validated specs (ValueError on bad data)."""
    rows = document.get("gpu")
    if not isinstance(rows, list) or not rows:
        raise ValueError("the catalog has no [[gpu]] rows.")
    specs = tuple(_parse_row(row, position) for position, row in enumerate(rows, 1))
    seen: set[str] = set()
    for spec in specs:
        if spec.key in seen:
            raise ValueError(f"the key {spec.key!r} appears in more than one row.")
        seen.add(spec.key)
    _build_index(specs)
    return specs


def _parse_row(row: Any, position: int) -> GPUSpec:
    if not isinstance(row, Mapping):
        raise ValueError(f"row {position} is not a table.")
    where = f"row {position} ({row.get('key', '?')!r})"
    unknown = set(row) - _ROW_FIELDS
    if unknown:
        raise ValueError(f"{where} has unknown fields {sorted(unknown)}.")

    def text(name: str) -> str:
        value = row.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{where}: {name} must be a non-empty string, got {value!r}.")
        return value

    def number(name: str, value: Any = None) -> float:
        value = row.get(name) if value is None else value
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= 0
        ):
            raise ValueError(f"{where}: {name} must be a positive number, got {value!r}.")
        return float(value)

    key = text("key")
    if not _KEY_PATTERN.fullmatch(key):
        raise ValueError(f"{where}: key must be lowercase words joined by '-', got {key!r}.")
    aliases = row.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        raise ValueError(f"{where}: aliases must be a list of non-empty strings.")

    capability = row.get("compute_capability")
    gcn_arch = row.get("gcn_arch")
    if (capability is None) == (gcn_arch is None):
        raise ValueError(f"{where}: give exactly one of compute_capability and gcn_arch.")
    figures = [*_FIGURES]
    if capability is not None:
        if (
            not isinstance(capability, list)
            or len(capability) != 2
            or not all(isinstance(c, int) and not isinstance(c, bool) for c in capability)
        ):
            raise ValueError(f"{where}: compute_capability must be [major, minor].")
        figures.append("compute_capability")
    else:
        text("gcn_arch")
        figures.append("gcn_arch")

    flops = row.get("peak_flops")
    if not isinstance(flops, Mapping) or "fp32" not in flops:
        raise ValueError(f"{where}: peak_flops must be a table with at least fp32.")
    if set(flops) - set(_FLOPS_KEYS):
        raise ValueError(
            f"{where}: peak_flops keys must be among {_FLOPS_KEYS}, got {sorted(flops)}."
        )
    peak = {k: number(f"peak_flops.{k}", flops[k]) for k in _FLOPS_KEYS if k in flops}
    bf16 = row.get("bf16")
    if not isinstance(bf16, bool) or bf16 != ("bf16" in peak):
        raise ValueError(f"{where}: bf16 must be true exactly when peak_flops has bf16.")

    sources = row.get("sources")
    if not isinstance(sources, Mapping):
        raise ValueError(f"{where}: sources must be a table of figure -> source.")
    figures += [f"peak_flops.{k}" for k in peak]
    for figure in figures:
        source = sources.get(figure)
        if source is None and figure.startswith("peak_flops."):
            source = sources.get("peak_flops")  # one source for the whole table
        if not isinstance(source, str) or not source.strip():
            raise ValueError(f"{where}: no source for {figure}; add it under [gpu.sources].")
    known = {*figures, "peak_flops"}
    if set(sources) - known:
        raise ValueError(f"{where}: sources for unknown figures {sorted(set(sources) - known)}.")
    uncertain = row.get("uncertain", [])
    if not isinstance(uncertain, list) or set(uncertain) - set(figures):
        raise ValueError(f"{where}: uncertain must list figures of this row, got {uncertain!r}.")

    # GPU memory is marketed in binary units ("80 GB" HBM3 = 80 GiB; nvidia-smi shows
    # 81559 MiB, more than 80e9 bytes), so both figures are GiB and the reported total
    # must stay below the marketed size. Compared in decimal GB it would not.
    memory_bytes = round(number("memory_gib") * _GIB)
    torch_total_bytes = round(number("torch_total_gib") * _GIB)
    if torch_total_bytes > memory_bytes:
        raise ValueError(
            f"{where}: torch_total_gib ({row['torch_total_gib']}) exceeds memory_gib "
            f"({row['memory_gib']}); both are GiB."
        )
    multiprocessors = row.get("multiprocessor_count")
    if isinstance(multiprocessors, bool) or not isinstance(multiprocessors, int):
        raise ValueError(f"{where}: multiprocessor_count must be an integer.")
    number("multiprocessor_count")

    return GPUSpec(
        key=key,
        name=text("name"),
        torch_name=text("torch_name"),
        aliases=tuple(aliases),
        vendor=text("vendor"),
        compute_capability=None if capability is None else (capability[0], capability[1]),
        memory_bytes=memory_bytes,
        torch_total_bytes=torch_total_bytes,
        bandwidth_bytes_per_s=number("bandwidth_bytes_per_s"),
        peak_flops=MappingProxyType(peak),
        host_link=text("host_link"),
        host_bandwidth_bytes_per_s=number("host_bandwidth_bytes_per_s"),
        multiprocessor_count=multiprocessors,
        bf16=bf16,
        uncertain=tuple(uncertain),
        sources=MappingProxyType(dict(sources)),
        gcn_arch=gcn_arch,
    )
