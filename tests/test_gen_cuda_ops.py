"""tools/gen_cuda_ops.py's reading of what CUDA's host code did (the worker, which needs a
CUDA build, is exercised by running the generator; docs/sim.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import gen_cuda_ops as gen

LONG = "\"addmm_cuda\" not implemented for 'Long'"


def _run(ran=(), failed=None, result="ok", raised_in=None, mixed=(), out=None):
    found = {
        "ran": [list(k) for k in ran],
        "failed": list(failed) if failed else None,
        "result": result,
        "raised_in": raised_in,
        "mixed": [list(m) for m in mixed],
    }
    if out is not None:
        found["out"] = out
    return found


def _write(tmp_path: Path, records: list[dict]) -> Path:
    meta = {
        "torch": "2.99.0+cu130",
        "cuda": "13.0",
        "ops": 3,
        "dtypes": 2,
        "opinfo": {
            "mm|": {"cuda": ["float32"], "cpu": ["float32", "int64"]},
            "histc|": {"cuda": ["float32", "int32"], "cpu": ["float32"]},
            "conv|": {"cuda": ["float32"], "cpu": ["float32"]},
        },
        "no_kernel": {},
    }
    path = tmp_path / "raw.jsonl"
    lines = [json.dumps({"meta": meta}), *(json.dumps(r) for r in records)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tables_refuse_widen_and_leave_undecided(tmp_path: Path) -> None:
    mm_long = ("aten::mm.default", "int64,int64")
    mm_float = ("aten::mm.default", "float32,float32")
    histc_int = ("aten::histc.default", "int32")
    conv_int = ("aten::convolution.default", "int32,int32")
    records = [
        {"i": 0, "j": 0, "op": "mm|", "dtype": "float32", "samples": [
            {"cpu": _run([mm_float]), "cuda": _run([mm_float], out=[[[2, 2], "float32", "cuda:0"]])},
        ]},
        {"i": 0, "j": 1, "op": "mm|", "dtype": "int64", "samples": [
            {"cpu": _run([mm_long]), "cuda": _run([], mm_long, ["NotImplementedError", LONG], "torch:mm")},
        ]},
        {"i": 1, "j": 1, "op": "histc|", "dtype": "int32", "samples": [
            {"cpu": _run([], histc_int, ["NotImplementedError", "\"histogram_cpu\" ..."]),
             "cuda": _run([histc_int], out=[[[100], "int32", "cuda:0"]])},
        ]},
        {"i": 2, "j": 1, "op": "conv|", "dtype": "int32", "samples": [
            {"cpu": _run([conv_int]), "cuda": _run([], conv_int, "device")},
        ]},
    ]  # fmt: skip
    runtime, sweep = gen.tables(_write(tmp_path, records))
    kind, index, runs = runtime["refuse"]["aten::mm.default"]["int64,int64"]
    assert (kind, runtime["messages"][index], runs) == ("NotImplementedError", LONG, [])
    assert "float32,float32" not in runtime["refuse"]["aten::mm.default"]
    assert runtime["widen"] == {"aten::histc.default": ["int32"]}
    # CUDA's host code handed the int32 convolution to cuDNN, which OpInfo says refuses it
    assert ["aten::convolution.default", "int32,int32"] in sweep["library"]
    assert sweep["ops"]["conv|"]["samples"]["int32"] == [{"result": "unknown"}]
    assert sweep["ops"]["mm|"]["samples"]["int64"] == [{"result": ["NotImplementedError", LONG]}]


def test_an_error_of_the_samples_values_is_not_a_refusal(tmp_path: Path) -> None:
    """A text of its own is taken for CUDA's refusal of the dtype only if the same sample ran
    through the operator in another dtype."""
    eig = "aten::linalg_eig.default"
    nan = ["RuntimeError", "torch.linalg.eig: input tensor should not contain infs or NaNs."]
    records = [
        {"i": 0, "j": j, "op": "mm|", "dtype": dtype, "samples": [
            {"cpu": _run([(eig, dtype)]), "cuda": _run([], (eig, dtype), nan)},
        ]}
        for j, dtype in enumerate(("float32", "int64"))
    ]  # fmt: skip
    runtime, sweep = gen.tables(_write(tmp_path, records))
    assert eig not in runtime["refuse"]
    assert [eig, "float32", "values or shapes", nan[1]] in sweep["conditional"]


def test_paths_above_dispatch_and_device_mixing(tmp_path: Path) -> None:
    split = "tensor_split expected tensor_indices_or_sections to be on cpu, but it's on cuda:0"
    scatter = ("aten::select_scatter.default", "float32,float32")
    records = [
        {"i": 0, "j": 0, "op": "mm|", "dtype": "float32", "samples": [
            {"cpu": _run([("aten::split.default", "float32")]),
             "cuda": _run([], None, ["RuntimeError", split], "torch:tensor_split")},
            {"cpu": _run([scatter]), "cuda": _run([scatter]),
             "mixing": [{"host": 1, "result": "ok", "out": None, "above": False, "raised_in": None,
                         "mixed": [[scatter[0], "d,h", "ok"]]}]},
        ]},
    ]  # fmt: skip
    runtime, _ = gen.tables(_write(tmp_path, records))
    path = runtime["paths"]["torch:tensor_split"]
    texts = ["tensor_split expected tensor_indices_or_sections to be on cpu, but it's on cuda"]
    assert path == {"texts": texts, "dtypes": ["float32"], "mixing": False, "refuse": {}}
    assert runtime["mixing"] == {scatter[0]: {"allow": ["d,h"], "refuse": {}}}


@pytest.mark.parametrize(
    ("sig", "split"),
    [("float32", ("float32", "")), ("int64,int64|empty", ("int64,int64", "empty")),
     ("|=bool|scalar", ("|=bool", "scalar"))],
)  # fmt: skip
def test_shape_classes_split_off_signatures(sig: str, split: tuple[str, str]) -> None:
    assert gen._shape_class(sig) == split


def test_first_lines_leave_out_the_device_index() -> None:
    assert gen._first_line("on cuda:1, not cpu\nmore") == "on cuda, not cpu"


def test_a_factorys_shape_class_is_its_results(tmp_path: Path) -> None:
    """A call without tensors (tril_indices) is told apart by its result: CUDA returns an
    empty one before its dtype switch and refuses the dtype otherwise; a record made before
    the worker classed it is classed by the run's outputs."""
    tril = "aten::tril_indices.default"
    text = "\"tril_indices_cuda\" not implemented for 'Half'"
    records = [
        {"i": 0, "j": 0, "op": "mm|", "dtype": "float32", "samples": [
            {"cpu": _run([], (tril, "|=float16"), ["NotImplementedError", "cpu's"]),
             "cuda": _run([(tril, "|=float16")], out=[[[2, 0], "float16", "cuda:0"]])},
            {"cpu": _run([], (tril, "|=float16"), ["NotImplementedError", "cpu's"]),
             "cuda": _run([], (tril, "|=float16"), ["NotImplementedError", text])},
        ]},
    ]  # fmt: skip
    runtime, _ = gen.tables(_write(tmp_path, records))
    kind, index, runs = runtime["refuse"][tril]["|=float16"]
    assert (kind, runtime["messages"][index], runs) == (
        "NotImplementedError",
        text,
        ["empty", "filled"],  # no sample had an empty input with a result: the empty verdict
    )


def test_an_empty_input_with_a_result_is_refused_where_cuda_refused_it(tmp_path: Path) -> None:
    """addmm of an empty product scales ``self`` (refused for float8) and returns first for
    an empty result: the "filled" class keeps its own verdict where a sample reached it."""
    addmm = "aten::addmm.default"
    sig = "float8_e4m3fn,float8_e4m3fn,float8_e4m3fn"
    own = "\"addmm_cuda\" not implemented for 'Float8_e4m3fn'"
    mul = "\"mul_cuda\" not implemented for 'Float8_e4m3fn'"
    cpu = _run([], (addmm, sig), ["NotImplementedError", "cpu's"])
    records = [
        {"i": 0, "j": 0, "op": "mm|", "dtype": "float32", "samples": [
            {"cpu": cpu, "cuda": _run([], (addmm, sig), ["NotImplementedError", own])},
            {"cpu": cpu, "cuda": _run([(addmm, sig + "|empty")], out=[[[0, 2], "float8_e4m3fn", "cuda:0"]])},
            {"cpu": cpu, "cuda": _run([], (addmm, sig + "|filled"), ["NotImplementedError", mul])},
        ]},
    ]  # fmt: skip
    runtime, _ = gen.tables(_write(tmp_path, records))
    assert runtime["refuse"][addmm][sig][2] == ["empty"]


def test_a_run_after_reading_uncomputed_values_where_the_cpu_refused_them_is_undecided(
    tmp_path: Path,
) -> None:
    median = ("aten::median.dim", "int64")
    cpu = _run([], median, ["ValueError", "masked median expects no fully masked out rows"])
    read = _run([median])
    read["uncomputed"] = True
    records = [
        {"i": 1, "j": 1, "op": "histc|", "dtype": "int32", "samples": [
            {"cpu": cpu, "cuda": read},
            {"cpu": cpu, "cuda": _run([median])},  # no read: CUDA's run stands
        ]},
    ]  # fmt: skip
    _, sweep = gen.tables(_write(tmp_path, records))
    outcomes = sweep["ops"]["histc|"]["samples"]["int32"]
    assert [o["result"] for o in outcomes] == ["unknown", "ok"]


def test_a_signature_refused_with_several_texts_keeps_them_all(tmp_path: Path) -> None:
    conv = ("aten::convolution.default", "int64,int64")
    cudnn = "getCudnnDataTypeFromScalarType() not supported for Long"
    depthwise = "\"conv_depthwise2d_forward_cuda\" not implemented for 'Long'"
    conv_float = ("aten::convolution.default", "float32,float32")
    ran = {"cpu": _run([conv_float]), "cuda": _run([conv_float])}
    records = [
        # the same samples run in float32: the texts are CUDA's refusals of int64
        {"i": 0, "j": 0, "op": "conv|", "dtype": "float32", "samples": [ran, ran, ran]},
        {"i": 0, "j": 1, "op": "conv|", "dtype": "int64", "samples": [
            {"cpu": _run([conv]), "cuda": _run([], conv, ["RuntimeError", cudnn])},
            {"cpu": _run([conv]), "cuda": _run([], conv, ["RuntimeError", cudnn])},
            {"cpu": _run([conv]), "cuda": _run([], conv, ["NotImplementedError", depthwise])},
        ]},
    ]  # fmt: skip
    runtime, _ = gen.tables(_write(tmp_path, records))
    messages = runtime["messages"]
    kind, index, _ = runtime["refuse"][conv[0]][conv[1]]
    assert (kind, messages[index]) == ("RuntimeError", cudnn)  # the most common
    found = [(k, messages[i]) for k, i in runtime["alternatives"][conv[0]][conv[1]]]
    assert found == [("RuntimeError", cudnn), ("NotImplementedError", depthwise)]
