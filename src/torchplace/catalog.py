"""The GPU catalog: memory, bandwidth, dense peak FLOP/s, links and device properties.

The figures live in a data file shipped with the package (``torchplace/data/gpus.toml``),
one row per GPU model with the source of every figure next to it. The file is read
once, validated, and turned into frozen :class:`GPUSpec` records. Nothing here talks
to hardware: the catalog is what the simulator and the roofline use to describe a GPU
that may not be in the machine.

Units: bytes, bytes per second and FLOP/s (dense, no sparsity). ``memory_bytes`` is the
marketed memory (in binary GiB, which is what GPU "GB" are), ``torch_total_bytes`` what
``torch.cuda.get_device_properties(i).total_memory`` reports, which is less.
Link bandwidths are per direction.

The same file holds two small tables besides the GPUs: the device-property limits that
depend only on the architecture (:func:`cc_properties`, :func:`gcn_arch_properties`,
:meth:`GPUSpec.arch_properties`), and named inter-node networks (:func:`network`).

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
    >>> spec.l2_cache_bytes // 2**20, spec.gpu_link_bandwidth_bytes_per_s / 1e9
    (50, 450.0)
    >>> catalog.cc_properties(9, 0)["shared_memory_per_block_optin"]
    232448
    >>> catalog.network().bandwidth_bytes_per_s / 1e9
    50.0
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
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

if TYPE_CHECKING:
    import torch

__all__ = [
    "DEFAULT_GPU",
    "DEFAULT_NETWORK",
    "ArchProperties",
    "GPUSpec",
    "NetworkSpec",
    "cc_properties",
    "gcn_arch_properties",
    "gpus",
    "lookup",
    "network",
    "networks",
]

DEFAULT_GPU = "h100-sxm-80gb"
"""The catalog key used when a GPU is needed and none is named."""

DEFAULT_NETWORK = "ib-ndr-400"
"""The network :func:`network` returns when none is named.

InfiniBand NDR with one 400 Gb/s port per GPU, i.e. 50e9 bytes/s per direction per GPU:
the rail-optimised design of NVIDIA's DGX/HGX H100 nodes (eight single-port ConnectX-7
NICs for eight GPUs) and of most H100 clusters rented today, so the default matches the
default GPU. Slower fabrics are in :func:`networks`.
"""

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
    "gpu_link",
    "gpu_link_bandwidth_bytes_per_s",
)
# figures a row may leave out (None on the spec); each one given needs a source
_OPTIONAL_INT_FIGURES = ("l2_cache_bytes", "memory_bus_width_bits", "memory_clock_khz")
# a source under the group's name covers the figures that have none of their own
_SOURCE_GROUPS = dict.fromkeys(_OPTIONAL_INT_FIGURES, "device_properties")
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
        "l2_cache_bytes",
        "memory_bus_width_bits",
        "memory_clock_khz",
        "gpu_link",
        "gpu_link_bandwidth_bytes_per_s",
    }
)
_ARCH_PROPERTIES = (
    "max_threads_per_multi_processor",
    "max_threads_per_block",
    "warp_size",
    "regs_per_multiprocessor",
    "shared_memory_per_block",
    "shared_memory_per_block_optin",
    "shared_memory_per_multiprocessor",
)
_ARCH_FIELDS = frozenset(
    {*_ARCH_PROPERTIES, "compute_capability", "gcn_arch", "uncertain", "source"}
)
_NETWORK_FIELDS = frozenset({"key", "name", "aliases", "bandwidth_bytes_per_s", "source"})
# words a name may start with that do not tell GPUs apart ("NVIDIA GeForce RTX 4090")
_VENDOR_WORDS = ("nvidia", "amd", "tesla", "geforce", "instinct")
_KEY_PATTERN = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


class ArchProperties(TypedDict):
    """What ``torch.cuda.get_device_properties(i)`` reports that depends only on the architecture.

    The keys are torch's attribute names; the values are what CUDA's ``cudaDeviceProp``
    (or ROCm's ``hipDeviceProp_t``) holds for every GPU of the architecture. Sizes are
    in bytes.

    Attributes:
        max_threads_per_multi_processor: Resident threads per SM / CU
            (``maxThreadsPerMultiProcessor``).
        max_threads_per_block: Threads per block (``maxThreadsPerBlock``).
        warp_size: Threads per warp: 32 on NVIDIA, 64 (a wavefront) on AMD Instinct.
        regs_per_multiprocessor: 32-bit registers per SM / CU (``regsPerMultiprocessor``).
        shared_memory_per_block: Shared memory a block gets without opting in
            (``sharedMemPerBlock``, 48 KiB on NVIDIA).
        shared_memory_per_block_optin: The most a block can opt in to
            (``sharedMemPerBlockOptin``; CUDA keeps 1 KiB per block from 8.0 on).
        shared_memory_per_multiprocessor: Shared memory per SM / CU
            (``sharedMemPerMultiprocessor``).
    """

    max_threads_per_multi_processor: int
    max_threads_per_block: int
    warp_size: int
    regs_per_multiprocessor: int
    shared_memory_per_block: int
    shared_memory_per_block_optin: int
    shared_memory_per_multiprocessor: int


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
        uncertain: Names of the figures the sources mark as unverified, or that were
            derived rather than read from a device (peak FLOP/s entries as
            ``"peak_flops.<dtype>"``); the figure's source says why.
        sources: Figure name -> where the figure comes from (``"peak_flops"`` and
            ``"device_properties"`` cover the figures of their group that have no
            source of their own).
        gcn_arch: AMD architecture name (``props.gcnArchName``, e.g. ``"gfx942"``).
        l2_cache_bytes: L2 cache as the driver reports it (``cudaDeviceProp.l2CacheSize``,
            torch's ``L2_cache_size``), e.g. 50 MiB on the H100 SXM5. On the MI300X it
            is the sum over the 8 compute dies (4 MiB each); on the MI250X one GCD's.
            ``None`` where not catalogued.
        memory_bus_width_bits: Memory bus width as the driver reports it
            (``memoryBusWidth``, torch's ``memory_bus_width``). ``None`` where not
            catalogued.
        memory_clock_khz: Memory clock as the driver reports it, in kHz
            (``memoryClockRate``, torch's ``memory_clock_rate``). CUDA reports GDDR at
            half its data rate per pin (T4: 10 Gb/s GDDR6 -> 5001000) and HBM at its
            clock (H100: 2619000), so ``2 * clock * width / 8`` comes close to
            :attr:`bandwidth_bytes_per_s` on NVIDIA GPUs; it does not on the MI300X
            (HBM3 moves 4 transfers per reported clock). ``None`` where not catalogued.
        gpu_link: How the GPU talks to the other GPUs of its node, e.g.
            ``"NVLink 4 (18 links, 900 GB/s)"`` or ``"PCIe 4.0 x16 (no NVLink)"``.
            ``None`` only for specs built outside the catalog.
        gpu_link_bandwidth_bytes_per_s: GPU-to-GPU bandwidth within a node, per
            direction, summed over the GPU's links (NVIDIA quotes NVLink both
            directions together: the H100's "900 GB/s" is 450e9 here). For GPUs without
            NVLink or Infinity Fabric it is the PCIe per-direction rate; NVLink bridges
            sold separately are not assumed. ``None`` only for specs built outside the
            catalog.
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
    l2_cache_bytes: int | None = None
    memory_bus_width_bits: int | None = None
    memory_clock_khz: int | None = None
    gpu_link: str | None = None
    gpu_link_bandwidth_bytes_per_s: float | None = None

    def __hash__(self) -> int:
        return hash(self.key)

    def arch_properties(self) -> ArchProperties:
        """The device-property limits of this GPU's architecture.

        Returns:
            :func:`cc_properties` of the compute capability on NVIDIA,
            :func:`gcn_arch_properties` of ``gcn_arch`` on AMD.

        Raises:
            ValueError: If the catalog has no limits for the architecture (every row of
                the shipped catalog has them).

        Examples:
            >>> from torchplace import catalog
            >>> catalog.lookup("RTX 4090").arch_properties()["max_threads_per_multi_processor"]
            1536
            >>> catalog.lookup("MI300X").arch_properties()["warp_size"]
            64
        """
        if self.compute_capability is not None:
            return cc_properties(*self.compute_capability)
        if self.gcn_arch is not None:
            return gcn_arch_properties(self.gcn_arch)
        raise ValueError(
            f"GPU {self.key!r} has neither a compute capability nor a gcn_arch, so its "
            "architecture limits are unknown; give it one of the two."
        )

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
            "l2_cache_bytes": self.l2_cache_bytes,
            "memory_bus_width_bits": self.memory_bus_width_bits,
            "memory_clock_khz": self.memory_clock_khz,
            "gpu_link": self.gpu_link,
            "gpu_link_bandwidth_bytes_per_s": self.gpu_link_bandwidth_bytes_per_s,
            "uncertain": list(self.uncertain),
            "sources": dict(self.sources),
        }


@dataclass(frozen=True)
class NetworkSpec:
    """A network between nodes, as catalogued in ``torchplace/data/gpus.toml``.

    Attributes:
        key: Catalog key, e.g. ``"ib-ndr-400"``.
        name: Display name.
        aliases: Other names :func:`network` accepts.
        bandwidth_bytes_per_s: Line rate of one NIC port per direction (decimal:
            400 Gb/s = 50e9 bytes/s). This is the bandwidth per GPU where each GPU has
            its own port, as in NVIDIA's DGX/HGX nodes; where ``n`` GPUs share one
            port, each gets ``bandwidth_bytes_per_s / n``. Collectives achieve less
            than the line rate.
        source: Where the figure comes from.
    """

    key: str
    name: str
    aliases: tuple[str, ...]
    bandwidth_bytes_per_s: float
    source: str

    def to_dict(self) -> dict[str, Any]:
        """The network as plain JSON-ready values.

        Examples:
            >>> from torchplace import catalog
            >>> catalog.network("hdr").to_dict()["bandwidth_bytes_per_s"]
            25000000000.0
        """
        return {
            "key": self.key,
            "name": self.name,
            "aliases": list(self.aliases),
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "source": self.source,
        }


class _Catalog(NamedTuple):
    gpus: tuple[GPUSpec, ...]
    archs: dict[str, ArchProperties]  # "9.0" (compute capability) or "gfx942"
    networks: tuple[NetworkSpec, ...]


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


def cc_properties(major: int, minor: int) -> ArchProperties:
    """The device-property limits of an NVIDIA compute capability.

    These are the ``torch.cuda.get_device_properties(i)`` fields that every GPU of one
    compute capability shares, from the CUDA C++ Programming Guide's "Technical
    Specifications per Compute Capability" and checked against device dumps (the
    sources are in the data file). The catalog covers the capabilities of its GPUs:
    7.0, 7.5, 8.0, 8.6, 8.9, 9.0, 10.0 and 12.0.

    Args:
        major: Major compute capability (``props.major``).
        minor: Minor compute capability (``props.minor``).

    Returns:
        A fresh dict the caller may change.

    Raises:
        ValueError: If the arguments are not integers or the capability is not
            catalogued; the message lists the capabilities that are.

    Examples:
        >>> from torchplace import catalog
        >>> props = catalog.cc_properties(8, 0)
        >>> props["shared_memory_per_multiprocessor"], props["max_threads_per_multi_processor"]
        (167936, 2048)
        >>> catalog.cc_properties(7, 5)["max_threads_per_multi_processor"]
        1024
    """
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (major, minor)):
        raise ValueError(
            f"cc_properties expects integers such as cc_properties(9, 0), got "
            f"({major!r}, {minor!r})."
        )
    archs = _catalog().archs
    props = archs.get(f"{major}.{minor}")
    if props is None:
        known = ", ".join(k for k in archs if not k.startswith("gfx"))
        raise ValueError(
            f"The catalog has no device-property limits for compute capability "
            f"{major}.{minor}; it covers {known}. Use the nearest one of the same major "
            "version, or add an [[arch]] row with its source to torchplace/data/gpus.toml."
        )
    return props.copy()


def gcn_arch_properties(arch: str) -> ArchProperties:
    """The device-property limits of an AMD architecture, as ROCm reports them.

    Args:
        arch: The architecture, as ``props.gcnArchName`` gives it: ``"gfx942"`` or
            ``"gfx942:sramecc+:xnack-"`` (the feature flags after ``:`` are ignored).

    Returns:
        A fresh dict the caller may change.

    Raises:
        ValueError: If ``arch`` is not a string or not catalogued; the message lists
            the architectures that are.

    Examples:
        >>> from torchplace import catalog
        >>> catalog.gcn_arch_properties("gfx942:sramecc+:xnack-")["warp_size"]
        64
    """
    if not isinstance(arch, str):
        raise ValueError(f"gcn_arch_properties expects a string such as 'gfx942', got {arch!r}.")
    archs = _catalog().archs
    base = arch.split(":", 1)[0].strip().lower()
    props = archs.get(base) if base.startswith("gfx") else None
    if props is None:
        known = ", ".join(k for k in archs if k.startswith("gfx"))
        raise ValueError(
            f"The catalog has no device-property limits for the AMD architecture {arch!r}; "
            f"it covers {known}."
        )
    return props.copy()


def networks() -> tuple[NetworkSpec, ...]:
    """Every inter-node network in the catalog, fastest first (as in the data file).

    Raises:
        RuntimeError: If the installed data file is missing or invalid.

    Examples:
        >>> from torchplace import catalog
        >>> [n.key for n in catalog.networks()]
        ['ib-ndr-400', 'ib-hdr-200', 'roce-100', 'ethernet-25']
    """
    return _catalog().networks


def network(name: str = DEFAULT_NETWORK) -> NetworkSpec:
    """Find an inter-node network by key or alias (case, spaces and hyphens ignored).

    Args:
        name: ``"ib-ndr-400"`` (the default, :data:`DEFAULT_NETWORK`), ``"ib-hdr-200"``,
            ``"roce-100"``, ``"ethernet-25"``, or an alias such as ``"NDR"``.

    Returns:
        The matching :class:`NetworkSpec`.

    Raises:
        ValueError: If no network matches; the message lists the keys.

    Examples:
        >>> from torchplace import catalog
        >>> catalog.network("NDR").key
        'ib-ndr-400'
        >>> catalog.network("ethernet-25").bandwidth_bytes_per_s / 1e9
        3.125
    """
    if isinstance(name, str):
        wanted = _normalize(name)
        for spec in _catalog().networks:
            if wanted in {_normalize(n) for n in (spec.key, spec.name, *spec.aliases)}:
                return spec
    keys = ", ".join(spec.key for spec in _catalog().networks)
    raise ValueError(f"Unknown network {name!r}. The catalog has: {keys}.")


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
def _catalog() -> _Catalog:
    resource = resources.files("torchplace") / "data" / "gpus.toml"
    try:
        document = tomllib.loads(resource.read_text(encoding="utf-8"))
        return _parse_document(document)
    except (OSError, tomllib.TOMLDecodeError, ValueError) as e:
        raise RuntimeError(
            f"torchplace's GPU catalog ({resource}) could not be read: {e} "
            "Reinstall torchplace (pip install --force-reinstall torchplace)."
        ) from e


def _load() -> tuple[GPUSpec, ...]:
    return _catalog().gpus


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
    """Turn the parsed TOML document into validated GPU specs (ValueError on bad data).

    The whole document is validated, the [[arch]] and [[network]] tables included.
    """
    return _parse_document(document).gpus


def _parse_document(document: Mapping[str, Any]) -> _Catalog:
    specs = _parse_gpus(document)
    archs = _parse_archs(document)
    for spec in specs:
        arch = (
            spec.gcn_arch
            if spec.compute_capability is None
            else "{}.{}".format(*spec.compute_capability)
        )
        if arch not in archs:
            raise ValueError(
                f"GPU {spec.key!r} has the architecture {arch!r}, which has no [[arch]] row."
            )
    return _Catalog(gpus=specs, archs=archs, networks=_parse_networks(document))


def _parse_gpus(document: Mapping[str, Any]) -> tuple[GPUSpec, ...]:
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

    optional: dict[str, int] = {}
    for name in _OPTIONAL_INT_FIGURES:
        if name in row:
            value = row[name]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{where}: {name} must be a positive integer, got {value!r}.")
            optional[name] = value
            figures.append(name)
    gpu_link = text("gpu_link")
    gpu_link_bandwidth = number("gpu_link_bandwidth_bytes_per_s")
    if gpu_link.startswith("PCIe") and gpu_link_bandwidth != number("host_bandwidth_bytes_per_s"):
        raise ValueError(
            f"{where}: gpu_link is PCIe, so gpu_link_bandwidth_bytes_per_s "
            f"({row['gpu_link_bandwidth_bytes_per_s']}) must equal host_bandwidth_bytes_per_s "
            f"({row['host_bandwidth_bytes_per_s']}), the PCIe rate per direction."
        )

    sources = row.get("sources")
    if not isinstance(sources, Mapping):
        raise ValueError(f"{where}: sources must be a table of figure -> source.")
    figures += [f"peak_flops.{k}" for k in peak]
    for figure in figures:
        source = sources.get(figure)
        if source is None:  # one source for the whole group
            source = sources.get(_source_group(figure) or "")
        if not isinstance(source, str) or not source.strip():
            raise ValueError(f"{where}: no source for {figure}; add it under [gpu.sources].")
    known = {*figures, "peak_flops"} | {_source_group(f) for f in figures if _source_group(f)}
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
        l2_cache_bytes=optional.get("l2_cache_bytes"),
        memory_bus_width_bits=optional.get("memory_bus_width_bits"),
        memory_clock_khz=optional.get("memory_clock_khz"),
        gpu_link=gpu_link,
        gpu_link_bandwidth_bytes_per_s=gpu_link_bandwidth,
    )


def _source_group(figure: str) -> str | None:
    if figure.startswith("peak_flops."):
        return "peak_flops"
    return _SOURCE_GROUPS.get(figure)


def _parse_archs(document: Mapping[str, Any]) -> dict[str, ArchProperties]:
    rows = document.get("arch")
    if not isinstance(rows, list) or not rows:
        raise ValueError("the catalog has no [[arch]] rows.")
    archs: dict[str, ArchProperties] = {}
    for position, row in enumerate(rows, 1):
        if not isinstance(row, Mapping):
            raise ValueError(f"[[arch]] row {position} is not a table.")
        capability, gcn_arch = row.get("compute_capability"), row.get("gcn_arch")
        if capability is not None and gcn_arch is None:
            if (
                not isinstance(capability, list)
                or len(capability) != 2
                or not all(isinstance(c, int) and not isinstance(c, bool) for c in capability)
            ):
                raise ValueError(
                    f"[[arch]] row {position}: compute_capability must be [major, minor]."
                )
            key = "{}.{}".format(*capability)
        elif gcn_arch is not None and capability is None:
            if not isinstance(gcn_arch, str) or not re.fullmatch(r"gfx[0-9a-f]+", gcn_arch):
                raise ValueError(f"[[arch]] row {position}: gcn_arch must be like 'gfx942'.")
            key = gcn_arch
        else:
            raise ValueError(
                f"[[arch]] row {position}: give exactly one of compute_capability and gcn_arch."
            )
        where = f"[[arch]] {key}"
        unknown = set(row) - _ARCH_FIELDS
        if unknown:
            raise ValueError(f"{where} has unknown fields {sorted(unknown)}.")
        values: dict[str, int] = {}
        for name in _ARCH_PROPERTIES:
            value = row.get(name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{where}: {name} must be a positive integer, got {value!r}.")
            values[name] = value
        props = ArchProperties(
            max_threads_per_multi_processor=values["max_threads_per_multi_processor"],
            max_threads_per_block=values["max_threads_per_block"],
            warp_size=values["warp_size"],
            regs_per_multiprocessor=values["regs_per_multiprocessor"],
            shared_memory_per_block=values["shared_memory_per_block"],
            shared_memory_per_block_optin=values["shared_memory_per_block_optin"],
            shared_memory_per_multiprocessor=values["shared_memory_per_multiprocessor"],
        )
        if not (
            props["shared_memory_per_block"]
            <= props["shared_memory_per_block_optin"]
            <= props["shared_memory_per_multiprocessor"]
        ):
            raise ValueError(
                f"{where}: shared memory must grow from per block to per block opt-in to per "
                "multiprocessor."
            )
        if props["max_threads_per_block"] > props["max_threads_per_multi_processor"]:
            raise ValueError(f"{where}: a block cannot hold more threads than a multiprocessor.")
        source = row.get("source")
        if not isinstance(source, str) or not source.strip():
            raise ValueError(f'{where}: no source; add source = "..." to the row.')
        uncertain = row.get("uncertain", [])
        if not isinstance(uncertain, list) or set(uncertain) - set(_ARCH_PROPERTIES):
            raise ValueError(f"{where}: uncertain must list fields of this row, got {uncertain!r}.")
        if key in archs:
            raise ValueError(f"{where} appears in more than one row.")
        archs[key] = props
    return archs


def _parse_networks(document: Mapping[str, Any]) -> tuple[NetworkSpec, ...]:
    rows = document.get("network")
    if not isinstance(rows, list) or not rows:
        raise ValueError("the catalog has no [[network]] rows.")
    specs: list[NetworkSpec] = []
    names: dict[str, str] = {}
    for position, row in enumerate(rows, 1):
        if not isinstance(row, Mapping):
            raise ValueError(f"[[network]] row {position} is not a table.")
        where = f"[[network]] row {position} ({row.get('key', '?')!r})"
        unknown = set(row) - _NETWORK_FIELDS
        if unknown:
            raise ValueError(f"{where} has unknown fields {sorted(unknown)}.")
        for name in ("key", "name", "source"):
            if not isinstance(row.get(name), str) or not row[name].strip():
                raise ValueError(f"{where}: {name} must be a non-empty string.")
        if not _KEY_PATTERN.fullmatch(row["key"]):
            raise ValueError(f"{where}: key must be lowercase words joined by '-'.")
        aliases = row.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
            raise ValueError(f"{where}: aliases must be a list of non-empty strings.")
        bandwidth = row.get("bandwidth_bytes_per_s")
        if (
            isinstance(bandwidth, bool)
            or not isinstance(bandwidth, (int, float))
            or not math.isfinite(bandwidth)
            or bandwidth <= 0
        ):
            raise ValueError(f"{where}: bandwidth_bytes_per_s must be a positive number.")
        for text in (row["key"], row["name"], *aliases):
            other = names.setdefault(_normalize(text), row["key"])
            if other != row["key"]:
                raise ValueError(
                    f"networks {other!r} and {row['key']!r} both answer to the name {text!r}."
                )
        specs.append(
            NetworkSpec(
                key=row["key"],
                name=row["name"],
                aliases=tuple(aliases),
                bandwidth_bytes_per_s=float(bandwidth),
                source=row["source"],
            )
        )
    if _normalize(DEFAULT_NETWORK) not in names:
        raise ValueError(f"the default network {DEFAULT_NETWORK!r} has no [[network]] row.")
    return tuple(specs)
