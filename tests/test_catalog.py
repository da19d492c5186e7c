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
