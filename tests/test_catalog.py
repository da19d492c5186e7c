from __future__ import annotations

import copy
import dataclasses
import doctest
import json
import subprocess
import sys
from importlib import resources
from typing import Any

import pytest
import torch

from torchplace import catalog
from torchplace.catalog import DEFAULT_GPU, GPUSpec, gpus, lookup

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GIB = 1024**3
REQUIRED_KEYS = [
    "t4",
    "v100-sxm2-16gb",
    "v100-sxm2-32gb",
    "a10",
    "a10g",
    "l4",
    "l40s",
    "a100-sxm-40gb",
    "a100-pcie-40gb",
    "a100-sxm-80gb",
    "a100-pcie-80gb",
    "h100-sxm-80gb",
    "h100-pcie-80gb",
    "h100-nvl-94gb",
    "h200-sxm-141gb",
    "b200",
    "rtx-3090",
    "rtx-4090",
    "rtx-5090",
    "mi250x-gcd",
    "mi300x",
]


def _document() -> dict[str, Any]:
    text = (resources.files("torchplace") / "data" / "gpus.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def test_docstring_examples_run() -> None:
    result = doctest.testmod(catalog)
    assert result.attempted > 0
    assert result.failed == 0


def test_catalog_has_the_required_rows_in_file_order() -> None:
    assert [spec.key for spec in gpus()] == REQUIRED_KEYS
    assert DEFAULT_GPU in REQUIRED_KEYS
    assert gpus() is gpus()  # read once


def test_importing_the_catalog_does_not_import_torch() -> None:
    code = "import sys, torchplace.catalog as c; c.lookup('H100'); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------------- lookup


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("H100", "h100-sxm-80gb"),
        ("h100", "h100-sxm-80gb"),
        ("H100 SXM", "h100-sxm-80gb"),
        ("H100 80GB", "h100-sxm-80gb"),
        ("nvidia h100 80gb hbm3", "h100-sxm-80gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm-80gb"),
        ("h100_sxm_80gb", "h100-sxm-80gb"),
        ("  H100  ", "h100-sxm-80gb"),
        ("H100 PCIe", "h100-pcie-80gb"),
        ("NVIDIA H100 NVL", "h100-nvl-94gb"),
        ("H200", "h200-sxm-141gb"),
        ("A100", "a100-sxm-80gb"),
        ("A100 80GB", "a100-sxm-80gb"),
        ("a100-80gb", "a100-sxm-80gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("A100 40GB", "a100-sxm-40gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
        ("A100 PCIe", "a100-pcie-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("T4", "t4"),
        ("Tesla T4", "t4"),
        ("nvidia t4", "t4"),
        ("V100", "v100-sxm2-32gb"),
        ("Tesla V100-SXM2-16GB", "v100-sxm2-16gb"),
        ("A10", "a10"),
        ("a10g", "a10g"),
        ("L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("rtx4090", "rtx-4090"),
        ("RTX 4090", "rtx-4090"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("GeForce RTX 3090", "rtx-3090"),
        ("rtx_5090", "rtx-5090"),
        ("B200", "b200"),
        ("MI250X", "mi250x-gcd"),
        ("AMD Instinct MI250X/MI250", "mi250x-gcd"),
        ("AMD Instinct MI300X", "mi300x"),
        ("mi300x", "mi300x"),
    ],
)
def test_lookup_matches_loosely(name: str, key: str) -> None:
    assert lookup(name).key == key


def test_every_key_alias_and_torch_name_finds_its_row() -> None:
    for spec in gpus():
        for name in (spec.key, spec.name, spec.torch_name, *spec.aliases):
            assert lookup(name) is spec, name


def test_unknown_name_lists_the_keys_and_suggests_the_nearest() -> None:
    with pytest.raises(ValueError, match="Unknown GPU 'H10O'") as info:
        lookup("H10O")
    message = str(info.value)
    assert "Did you mean 'h100-sxm-80gb'?" in message
    assert all(key in message for key in REQUIRED_KEYS)


def test_unknown_name_without_a_near_match() -> None:
    with pytest.raises(ValueError, match="Unknown GPU 'zzzzzzzz'") as info:
        lookup("zzzzzzzz")
    assert "Did you mean" not in str(info.value)


@pytest.mark.parametrize("bad", ["", "nvidia", 100, None])
def test_lookup_rejects_non_names(bad: Any) -> None:
    with pytest.raises(ValueError):
        lookup(bad)


# ---------------------------------------------------------------------- peak_flops_for


def test_peak_flops_for_dtypes() -> None:
    h100 = lookup("H100")
    assert h100.peak_flops_for(torch.float32) == 67e12
    assert h100.peak_flops_for(torch.float32, tf32=True) == 494.7e12
    assert h100.peak_flops_for(torch.bfloat16) == 989.4e12
    assert h100.peak_flops_for(torch.float16) == 989.4e12
    assert h100.peak_flops_for(torch.float8_e4m3fn) == 1979e12
    assert h100.peak_flops_for(torch.float8_e5m2) == 1979e12
    assert h100.peak_flops_for(torch.float64) is None  # not catalogued
    assert h100.peak_flops_for(torch.int8) is None


def test_peak_flops_for_missing_hardware_support() -> None:
    t4 = lookup("T4")
    assert t4.peak_flops_for(torch.bfloat16) is None
    assert t4.peak_flops_for(torch.float16) == 65e12
    # no TF32 on Turing: float32 runs at the fp32 rate even when TF32 is allowed
    assert t4.peak_flops_for(torch.float32, tf32=True) == 8.1e12
    assert lookup("A100").peak_flops_for(torch.float8_e4m3fn) is None


def test_peak_flops_for_rejects_non_dtypes() -> None:
    with pytest.raises(ValueError, match=r"expects a torch\.dtype"):
        lookup("H100").peak_flops_for("bf16")  # type: ignore[arg-type]


# ------------------------------------------------------------------ figures and rows


def test_spot_checks_against_the_reference() -> None:
    h100 = lookup("h100-sxm-80gb")
    assert h100.peak_flops["bf16"] == 989.4e12
    assert h100.bandwidth_bytes_per_s == 3.35e12
    assert h100.compute_capability == (9, 0)
    assert h100.memory_bytes == 80 * GIB
    assert h100.torch_total_bytes == round(79.11 * GIB)
    assert h100.host_bandwidth_bytes_per_s == 64e9
    assert h100.multiprocessor_count == 132
    assert h100.uncertain == ()

    t4 = lookup("t4")
    assert t4.bf16 is False and "bf16" not in t4.peak_flops and "tf32" not in t4.peak_flops
    assert t4.torch_total_bytes == round(14.56 * GIB)  # lowest of 14.56-14.76 observed
    assert "14.56-14.76" in t4.sources["torch_total_bytes"]
    assert t4.host_bandwidth_bytes_per_s == 16e9

    assert lookup("a100-sxm-80gb").bandwidth_bytes_per_s == 2039e9
    assert lookup("a100-pcie-80gb").bandwidth_bytes_per_s == 1935e9
    # GeForce BF16 is the tensor rate with FP32 accumulate, not Lightning's non-tensor 82.6
    assert lookup("rtx-4090").peak_flops["bf16"] == 165.2e12
    assert lookup("rtx-3090").peak_flops["bf16"] == 71e12
    assert lookup("b200").peak_flops["bf16"] == 2250e12
    mi250x = lookup("mi250x-gcd")  # one GCD = one torch device
    assert mi250x.peak_flops["bf16"] == 191.5e12
    assert mi250x.compute_capability is None and mi250x.gcn_arch == "gfx90a"
    assert lookup("mi300x").multiprocessor_count == 304


def test_question_marked_figures_are_uncertain() -> None:
    assert "torch_total_bytes" in lookup("h200").uncertain
    assert "torch_total_bytes" in lookup("v100 16gb").uncertain
    assert "torch_total_bytes" not in lookup("v100 32gb").uncertain
    assert {"peak_flops.bf16", "peak_flops.fp32"} <= set(lookup("a10g").uncertain)
    assert "peak_flops.fp8" in lookup("rtx-5090").uncertain
    assert "peak_flops.fp32" not in lookup("rtx-5090").uncertain


def test_every_row_is_valid() -> None:
    aliases: dict[str, str] = {}
    for spec in gpus():
        figures = [
            "torch_name",
            "memory_bytes",
            "torch_total_bytes",
            "bandwidth_bytes_per_s",
            "host_link",
            "host_bandwidth_bytes_per_s",
            "multiprocessor_count",
            "bf16",
            "compute_capability" if spec.vendor == "nvidia" else "gcn_arch",
        ]
        for figure in figures:
            assert spec.sources.get(figure), (spec.key, figure)
        for dtype, flops in spec.peak_flops.items():
            assert spec.sources.get(f"peak_flops.{dtype}") or spec.sources.get("peak_flops")
            assert flops > 0
        assert 0 < spec.torch_total_bytes <= spec.memory_bytes
        assert spec.bandwidth_bytes_per_s > 0 and spec.host_bandwidth_bytes_per_s > 0
        assert spec.host_bandwidth_bytes_per_s in (16e9, 32e9, 64e9)
        assert spec.multiprocessor_count > 0
        assert spec.bf16 == ("bf16" in spec.peak_flops)
        assert (spec.compute_capability is None) == (spec.vendor == "amd")
        if spec.compute_capability is not None:
            assert spec.bf16 == (spec.compute_capability >= (8, 0))
        for alias in spec.aliases:
            assert aliases.setdefault(alias.lower(), spec.key) == spec.key


def test_spec_is_frozen_hashable_and_serialisable() -> None:
    spec = lookup("L4")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.key = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.peak_flops["fp32"] = 1.0  # type: ignore[index]
    assert {spec: 1}[lookup("l4")] == 1
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["key"] == "l4"
    assert data["compute_capability"] == [8, 9]
    assert data["peak_flops"]["fp8"] == 242.5e12
    assert data["memory_bytes"] == 24 * GIB
    assert isinstance(spec, GPUSpec)


# ----------------------------------------------------------------- data validation


def _parse(document: dict[str, Any]) -> tuple[GPUSpec, ...]:
    return catalog._parse_catalog(document)


def _broken(change: Any) -> dict[str, Any]:
    document = copy.deepcopy(_document())
    change(document["gpu"])
    return document


def test_the_shipped_document_parses_to_the_loaded_catalog() -> None:
    assert _parse(_document()) == gpus()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda rows: rows[0]["sources"].pop("memory_bytes"), "no source for memory_bytes"),
        (lambda rows: rows[0]["sources"].pop("peak_flops"), "no source for peak_flops.fp32"),
        (lambda rows: rows[1]["sources"].update(memory_bytes=" "), "no source for memory_bytes"),
        (lambda rows: rows[0]["sources"].update(colour="x"), "unknown figures"),
        (lambda rows: rows[0].update(bandwidth_bytes_per_s=-1.0), "must be a positive number"),
        (lambda rows: rows[0].update(bandwidth_bytes_per_s=float("nan")), "positive number"),
        (lambda rows: rows[0]["peak_flops"].update(fp32=0), "positive number"),
        (lambda rows: rows[0]["peak_flops"].update(fp4=1e15), "peak_flops keys"),
        (lambda rows: rows[0].update(torch_total_gib=16.5), "exceeds memory_gib"),
        (lambda rows: rows[0].update(bf16=True), "bf16 must be true exactly when"),
        (lambda rows: rows[0].update(uncertain=["speed"]), "uncertain must list figures"),
        (lambda rows: rows[0].update(colour="green"), "unknown fields"),
        (lambda rows: rows[0].update(key="T4"), "lowercase words"),
        (lambda rows: rows[0].update(gcn_arch="gfx90a"), "exactly one of"),
        (lambda rows: rows[0].update(compute_capability=[7]), r"\[major, minor\]"),
        (lambda rows: rows[0].update(multiprocessor_count=40.5), "must be an integer"),
        (lambda rows: rows[1].update(key="t4"), "appears in more than one row"),
        (lambda rows: rows[1]["aliases"].append("t4"), "both answer to the name 't4'"),
        (lambda rows: rows[2]["aliases"].append("NVIDIA Tesla T4"), "both answer to"),
        (lambda rows: rows.clear(), "no \\[\\[gpu\\]\\] rows"),
    ],
)
def test_validation_rejects_bad_rows(change: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _parse(_broken(change))


# ------------------------------------------ device properties, GPU links (CUDA-reported)

MIB = 1024**2


@pytest.mark.parametrize(
    ("key", "l2_bytes", "bus_bits", "clock_khz", "link_per_direction"),
    [
        # deviceQuery / hipGetDeviceProperties outputs named in the data file's sources
        ("t4", 4 * MIB, 256, 5001000, 16e9),
        ("v100-sxm2-32gb", 6 * MIB, 4096, 877000, 150e9),
        ("a10", 6 * MIB, 384, 6251000, 32e9),
        ("l4", 48 * MIB, 192, 6251000, 32e9),
        ("l40s", 96 * MIB, 384, 9001000, 32e9),
        ("a100-sxm-40gb", 40 * MIB, 5120, 1215000, 300e9),
        ("a100-sxm-80gb", 40 * MIB, 5120, 1593000, 300e9),
        ("a100-pcie-80gb", 40 * MIB, 5120, 1512000, 32e9),
        ("h100-sxm-80gb", 50 * MIB, 5120, 2619000, 450e9),
        ("h100-nvl-94gb", 60 * MIB, 6144, 2619000, 300e9),
        ("b200", 132644864, 7680, 3996000, 900e9),
        ("rtx-3090", 6 * MIB, 384, 9751000, 32e9),
        ("rtx-4090", 72 * MIB, 384, 10501000, 32e9),
        ("rtx-5090", 96 * MIB, 512, 14001000, 64e9),
        ("mi250x-gcd", 8 * MIB, 4096, 1600000, 200e9),
        ("mi300x", 32 * MIB, 8192, 1300000, 448e9),
    ],
)
def test_device_properties_and_links_against_the_sources(
    key: str, l2_bytes: int, bus_bits: int, clock_khz: int, link_per_direction: float
) -> None:
    spec = lookup(key)
    assert spec.l2_cache_bytes == l2_bytes
    assert spec.memory_bus_width_bits == bus_bits
    assert spec.memory_clock_khz == clock_khz
    assert spec.gpu_link_bandwidth_bytes_per_s == link_per_direction


def test_memory_clock_and_bus_width_give_the_bandwidth_on_nvidia() -> None:
    # CUDA reports GDDR at half the data rate and HBM at its clock, so 2 x clock x width
    # is the datasheet bandwidth, within 5% (B200 7.67 vs 8 TB/s is the farthest).
    for spec in gpus():
        if spec.vendor != "nvidia":
            continue
        assert spec.memory_clock_khz is not None and spec.memory_bus_width_bits is not None
        derived = 2 * spec.memory_clock_khz * 1e3 * spec.memory_bus_width_bits / 8
        assert derived == pytest.approx(spec.bandwidth_bytes_per_s, rel=0.05), spec.key
    # not on the MI300X: HBM3 moves 4 transfers per reported clock (the source says so)
    mi300x = lookup("mi300x")
    assert mi300x.memory_clock_khz is not None and mi300x.memory_bus_width_bits is not None
    derived = 2 * mi300x.memory_clock_khz * 1e3 * mi300x.memory_bus_width_bits / 8
    assert derived == pytest.approx(mi300x.bandwidth_bytes_per_s / 2, rel=0.01)


def test_gpu_links() -> None:
    for spec in gpus():
        assert spec.gpu_link and spec.gpu_link_bandwidth_bytes_per_s is not None
        if spec.gpu_link.startswith("PCIe"):
            # no NVLink / Infinity Fabric: GPUs talk over PCIe, per direction
            assert spec.gpu_link_bandwidth_bytes_per_s == spec.host_bandwidth_bytes_per_s
        else:
            assert spec.gpu_link_bandwidth_bytes_per_s > spec.host_bandwidth_bytes_per_s
    # NVIDIA quotes NVLink bidirectionally; the catalog holds one direction
    assert "900 GB/s" in lookup("H100").gpu_link  # type: ignore[operator]
    assert lookup("H100").gpu_link_bandwidth_bytes_per_s == 450e9
    assert lookup("H200").gpu_link_bandwidth_bytes_per_s == 450e9
    # bridges sold separately are not assumed; the H100 NVL comes bridged
    assert lookup("A100 PCIe").gpu_link_bandwidth_bytes_per_s == 32e9
    assert lookup("H100 PCIe").gpu_link_bandwidth_bytes_per_s == 64e9
    assert "bridge" in lookup("H100 NVL").gpu_link  # type: ignore[operator]


def test_derived_device_figures_are_uncertain() -> None:
    h200 = lookup("h200")
    assert {"l2_cache_bytes", "memory_bus_width_bits", "memory_clock_khz"} <= set(h200.uncertain)
    assert {"memory_bus_width_bits", "memory_clock_khz"} <= set(lookup("a10g").uncertain)
    assert {"memory_bus_width_bits", "memory_clock_khz"} <= set(lookup("h100 pcie").uncertain)
    assert "gpu_link_bandwidth_bytes_per_s" in lookup("mi250x").uncertain
    assert "l2_cache_bytes" in lookup("mi300x").uncertain
    read_from_devices = ("l2_cache_bytes", "memory_bus_width_bits", "memory_clock_khz")
    for key in ("h100-sxm-80gb", "t4", "b200", "rtx-4090"):
        assert not set(read_from_devices) & set(lookup(key).uncertain), key


def test_every_device_figure_has_a_source() -> None:
    for spec in gpus():
        for figure in ("l2_cache_bytes", "memory_bus_width_bits", "memory_clock_khz"):
            if getattr(spec, figure) is not None:
                assert spec.sources.get(figure) or spec.sources.get("device_properties")
        assert spec.sources.get("gpu_link") and spec.sources.get("gpu_link_bandwidth_bytes_per_s")
        for figure in spec.uncertain:
            source = spec.sources.get(figure) or spec.sources.get(
                "peak_flops" if figure.startswith("peak_flops.") else "device_properties", ""
            )
            assert source, (spec.key, figure)


# ------------------------------------------------------------- architecture limits

ARCH_KEYS = set(catalog.ArchProperties.__annotations__)


@pytest.mark.parametrize(
    ("major", "minor", "threads_per_sm", "optin", "per_sm"),
    [
        # CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"
        (7, 0, 2048, 96 * 1024, 96 * 1024),
        (7, 5, 1024, 64 * 1024, 64 * 1024),
        (8, 0, 2048, 163 * 1024, 164 * 1024),
        (8, 6, 1536, 99 * 1024, 100 * 1024),
        (8, 9, 1536, 99 * 1024, 100 * 1024),
        (9, 0, 2048, 227 * 1024, 228 * 1024),
        (10, 0, 2048, 227 * 1024, 228 * 1024),
        (12, 0, 1536, 99 * 1024, 100 * 1024),
    ],
)
def test_cc_properties(
    major: int, minor: int, threads_per_sm: int, optin: int, per_sm: int
) -> None:
    props = catalog.cc_properties(major, minor)
    assert set(props) == ARCH_KEYS
    assert props["max_threads_per_multi_processor"] == threads_per_sm
    assert props["shared_memory_per_block_optin"] == optin
    assert props["shared_memory_per_multiprocessor"] == per_sm
    assert props["max_threads_per_block"] == 1024
    assert props["warp_size"] == 32
    assert props["regs_per_multiprocessor"] == 65536
    assert props["shared_memory_per_block"] == 48 * 1024


def test_cc_properties_returns_a_fresh_dict() -> None:
    props = catalog.cc_properties(9, 0)
    props["warp_size"] = 7
    assert catalog.cc_properties(9, 0)["warp_size"] == 32


@pytest.mark.parametrize("bad", [(8, 7), (6, 0), (90, 0)])
def test_cc_properties_unknown_capability(bad: tuple[int, int]) -> None:
    with pytest.raises(ValueError, match=r"no device-property limits.*covers 7\.0, 7\.5"):
        catalog.cc_properties(*bad)


@pytest.mark.parametrize("bad", [("9", 0), (9.0, 0), (True, 0)])
def test_cc_properties_rejects_non_integers(bad: tuple[Any, Any]) -> None:
    with pytest.raises(ValueError, match="expects integers"):
        catalog.cc_properties(*bad)


def test_gcn_arch_properties() -> None:
    assert catalog.gcn_arch_properties("gfx942")["warp_size"] == 64
    flags = catalog.gcn_arch_properties("gfx942:sramecc+:xnack-")
    assert flags == catalog.gcn_arch_properties("gfx942")
    assert set(flags) == ARCH_KEYS
    assert catalog.gcn_arch_properties("gfx90a")["shared_memory_per_multiprocessor"] == 65536
    for bad in ("gfx1100", "9.0", ""):
        with pytest.raises(ValueError, match="covers gfx90a, gfx942"):
            catalog.gcn_arch_properties(bad)
    with pytest.raises(ValueError, match="expects a string"):
        catalog.gcn_arch_properties(942)  # type: ignore[arg-type]


def test_every_gpu_has_its_architecture_limits() -> None:
    for spec in gpus():
        props = spec.arch_properties()
        assert set(props) == ARCH_KEYS
        assert props["warp_size"] == (32 if spec.vendor == "nvidia" else 64)
    assert lookup("B200").arch_properties() == catalog.cc_properties(10, 0)
    assert lookup("MI250X").arch_properties() == catalog.gcn_arch_properties("gfx90a")


def test_arch_properties_of_a_spec_without_architecture() -> None:
    spec = dataclasses.replace(lookup("T4"), compute_capability=None)
    with pytest.raises(ValueError, match="neither a compute capability nor a gcn_arch"):
        spec.arch_properties()


# ---------------------------------------------------------------------------- networks


def test_networks() -> None:
    assert catalog.DEFAULT_NETWORK == "ib-ndr-400"
    assert catalog.network() is catalog.network(catalog.DEFAULT_NETWORK)
    by_key = {n.key: n.bandwidth_bytes_per_s for n in catalog.networks()}
    # line rate of one port, per direction: Gb/s / 8
    assert by_key == {
        "ib-ndr-400": 50e9,
        "ib-hdr-200": 25e9,
        "roce-100": 12.5e9,
        "ethernet-25": 3.125e9,
    }
    for spec in catalog.networks():
        assert spec.source.strip()
        assert catalog.network(spec.key) is spec
        assert catalog.network(spec.name.upper()) is spec
        for alias in spec.aliases:
            assert catalog.network(alias) is spec
        assert json.loads(json.dumps(spec.to_dict()))["key"] == spec.key
    assert catalog.network("Infiniband NDR").key == "ib-ndr-400"


@pytest.mark.parametrize("bad", ["ib-xdr-800", "", None, 400])
def test_unknown_network(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"Unknown network.*ib-ndr-400, ib-hdr-200"):
        catalog.network(bad)


# ------------------------------------------------------ validation of the new tables


def _broken_document(change: Any) -> dict[str, Any]:
    document = copy.deepcopy(_document())
    change(document)
    return document


def _drop_optional(document: dict[str, Any]) -> None:
    row = document["gpu"][0]
    for name in ("l2_cache_bytes", "memory_bus_width_bits", "memory_clock_khz"):
        row.pop(name)
    row["sources"].pop("device_properties")


def test_device_figures_are_optional() -> None:
    t4 = _parse(_broken_document(_drop_optional))[0]
    assert t4.key == "t4"
    assert (t4.l2_cache_bytes, t4.memory_bus_width_bits, t4.memory_clock_khz) == (None, None, None)
    assert t4.to_dict()["l2_cache_bytes"] is None


def _pcie_mismatch(rows: list[dict[str, Any]]) -> None:
    rows[0]["gpu_link_bandwidth_bytes_per_s"] = 32e9


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["gpu"][0].update(l2_cache_bytes=-1), "l2_cache_bytes must be a positive int"),
        (lambda d: d["gpu"][0].update(memory_bus_width_bits=True), "positive integer"),
        (lambda d: d["gpu"][0].update(memory_clock_khz=5001.5), "positive integer"),
        (lambda d: d["gpu"][0].pop("gpu_link"), "gpu_link must be a non-empty string"),
        (lambda d: d["gpu"][0].update(gpu_link_bandwidth_bytes_per_s=0), "positive number"),
        (lambda d: _pcie_mismatch(d["gpu"]), "must equal host_bandwidth_bytes_per_s"),
        (lambda d: d["gpu"][0]["sources"].pop("device_properties"), "no source for l2_cache"),
        (lambda d: d["gpu"][0]["sources"].pop("gpu_link"), "no source for gpu_link"),
        (lambda d: d["gpu"][0].update(uncertain=["clock"]), "uncertain must list figures"),
        (lambda d: d["arch"].pop(1), "architecture '7.5', which has no \\[\\[arch\\]\\] row"),
        (lambda d: d["arch"].append(dict(d["arch"][0])), "appears in more than one row"),
        (lambda d: d["arch"][0].update(warp_size=0), "warp_size must be a positive integer"),
        (lambda d: d["arch"][0].update(colour=1), "unknown fields"),
        (lambda d: d["arch"][0].pop("source"), "no source"),
        (lambda d: d["arch"][0].update(uncertain=["x"]), "uncertain must list fields"),
        (lambda d: d["arch"][0].update(gcn_arch="gfx90a"), "exactly one of"),
        (lambda d: d["arch"][-1].update(gcn_arch="942"), "must be like 'gfx942'"),
        (lambda d: d["arch"][0].update(compute_capability=[7]), r"\[major, minor\]"),
        (
            lambda d: d["arch"][0].update(shared_memory_per_block_optin=10**6),
            "shared memory must grow",
        ),
        (lambda d: d["arch"][0].update(max_threads_per_block=4096), "more threads"),
        (lambda d: d.pop("arch"), "no \\[\\[arch\\]\\] rows"),
        (lambda d: d["network"][0].update(bandwidth_bytes_per_s=-1), "positive number"),
        (lambda d: d["network"][1]["aliases"].append("NDR"), "both answer to the name"),
        (lambda d: d["network"][0].update(key="IB NDR"), "lowercase words"),
        (lambda d: d["network"][0].update(source=""), "source must be a non-empty string"),
        (lambda d: d["network"][0].update(speed=1), "unknown fields"),
        (lambda d: d["network"].pop(0), "default network 'ib-ndr-400'"),
        (lambda d: d.pop("network"), "no \\[\\[network\\]\\] rows"),
    ],
)
def test_validation_rejects_bad_tables(change: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _parse(_broken_document(change))
