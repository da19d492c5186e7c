"""Generate CUDA autocast's op table from the installed torch: src/torchplace/data/.

Which aten operators CUDA autocast touches, and how, is not typed by hand: the operators
are those with a kernel for the ``AutocastCUDA`` dispatch key in this torch's dispatcher
(both the CPU and the CUDA wheels register them: aten/src/ATen/autocast_mode.cpp), and the
policy of each is observed by calling it under ``torch.autocast("cuda")`` on tensors that
say they are on ``cuda`` (a wrapper subclass, which needs no driver) and watching what the
autocast kernel hands on (aten/src/ATen/autocast_mode.h, ``CastPolicy``):

- ``lower_precision_fp``: float32 inputs reach the operator cast to the autocast dtype;
- ``fp32``: float16 inputs reach it cast to float32;
- ``fp32_set_opt_dtype``: nothing is cast, and the operator's ``dtype`` argument, when left
  unset, is set to float32;
- ``fp32_append_dtype``: nothing is cast, and the call goes on to the overload that takes a
  ``dtype`` (float32);
- ``promote``: a float16 and a float32 input both reach it as float32;
- ``banned``: the call raises (its message is kept).

Run it with each torch minor version the simulator supports; it writes
``cuda_autocast_<major>.<minor>.json``:

    python tools/gen_autocast.py                 # writes the file for the installed torch
    python tools/gen_autocast.py --check         # fails if the shipped file differs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

_DATA = Path(__file__).resolve().parents[1] / "src" / "torchplace" / "data"
_aten = torch.ops.aten


#: The probes' device, with its index: a tensor made on ``cuda`` without one keeps no index,
#: and once this process has a current CUDA device (torch.compile asks for it), the options
#: a composite takes from the tensor name ``cuda:0``, so ``to(dtype)`` no longer sees the
#: same device and copies (aten/src/ATen/native/TensorConversions.cpp, ``to_will_alias``):
#: ``log_softmax.int``'s ``input.toType(kFloat)`` of a float32 probe then read as a cast.
_CUDA0 = torch.device("cuda", 0)


class _Stop(Exception):
    """Raised at the first operator the autocast kernel hands its arguments on to."""


class _Probe(torch.Tensor):
    """A tensor that says it is on ``cuda`` and records what the dispatcher does with it."""

    log: list[tuple[str, Any]] = []  # noqa: RUF012 (one probe at a time)
    inputs: set[int] = set()  # noqa: RUF012 the probes passed in (not made inside an op)

    @staticmethod
    def __new__(cls, dtype: torch.dtype) -> _Probe:
        return torch.Tensor._make_wrapper_subclass(cls, (2, 2), dtype=dtype, device=_CUDA0)

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is _aten._to_copy.default:
            dtype = kwargs.get("dtype", args[0].dtype)
            if id(args[0]) in cls.inputs:  # autocast's cast (a composite's own come later)
                cls.log.append(("cast", (args[0].dtype, dtype)))
            return _Probe(dtype)
        seen = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.dtype)]
        cls.log.append(("call", (str(func), seen)))
        raise _Stop


#: integers an autocast kernel itself checks (aten/src/ATen/cudnn/AutocastRNN.cpp: an LSTM
#: without projections, with biases)
_INTEGERS = {"weight_stride0": 4, "proj_size": 0}


def _value(arg: Any) -> Any:
    """A plausible value for a schema argument that is not a tensor (the autocast kernel
    casts before the operator looks at any of them)."""
    if arg.name in _INTEGERS:
        return _INTEGERS[arg.name]
    if arg.has_default_value():
        return arg.default_value
    kind = str(arg.type)
    if kind.startswith("Optional"):
        return None
    scalar = {"int": 1, "float": 1.0, "number": 1.0, "bool": False}
    if kind.startswith("List"):
        return [scalar.get(kind[5:-1], 1)]
    if kind == "str":  # an ord ("fro"), an equation, a padding mode or a dimension name
        return "fro" if arg.name == "ord" else "a"
    return scalar[kind]


def _call(op: Any, dtypes: list[torch.dtype]) -> tuple[list[tuple[str, Any]], str | None]:
    """Call ``op`` under CUDA autocast (float16) with probes of ``dtypes`` (the last one
    repeated)."""
    schema = op._schema
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    n = 0
    for a in schema.arguments:
        kind = str(a.type)
        if "Tensor" in kind:
            d = dtypes[min(n, len(dtypes) - 1)]
            n += 1
            many = "[]" in kind or kind.startswith("List")
            value: Any = [_Probe(d), _Probe(d)] if many else _Probe(d)
        else:
            value = _value(a)
        if a.kwarg_only:
            kwargs[a.name] = value
        else:
            args.append(value)
    _Probe.log = []
    _Probe.inputs = {
        id(t) for v in (*args, *kwargs.values()) for t in (v if isinstance(v, list) else [v])
    }
    error = None
    saved = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
    torch.set_autocast_enabled("cuda", True)
    torch.set_autocast_dtype("cuda", torch.float16)
    try:
        op(*args, **kwargs)
    except _Stop:
        pass
    except Exception as e:  # the banned operators, and arguments the kernel refuses
        error = f"{type(e).__name__}: {e}"
    finally:
        torch.set_autocast_enabled("cuda", saved[0])
        torch.set_autocast_dtype("cuda", saved[1])
    return _Probe.log, error


#: aten/src/ATen/cudnn/AutocastRNN.cpp (_cudnn_rnn_cast_reflatten): cuDNN RNNs cast their
#: input, states and weights to float16 (kHalf, whatever the autocast dtype), the weights into
#: one flat buffer. Its kernel needs a driver to observe, and builds without cuDNN (the CPU
#: wheel) do not compile it: the entry comes from that file.
_CUDNN_RNN = {"policy": "cudnn_rnn", "source": "aten/src/ATen/cudnn/AutocastRNN.cpp"}


def classify(op: Any) -> dict[str, Any]:
    """The policy of ``op``'s AutocastCUDA kernel, as observed."""
    f16, f32 = torch.float16, torch.float32
    low, low_error = _call(op, [f32])
    high, high_error = _call(op, [f16])
    mixed, _ = _call(op, [f16, f32])
    for error in (low_error, high_error):
        if error and "autocast" in error:
            return {"policy": "banned", "message": error.split(": ", 1)[1]}
    if "AutocastRNN.cpp" in torch._C._dispatch_dump(op._schema.name):
        return _CUDNN_RNN
    casts = {
        name: [c for kind, c in log if kind == "cast"]
        for name, log in (("low", low), ("high", high), ("mixed", mixed))
    }
    if casts["low"] and all(to == f16 for _, to in casts["low"]):
        return {"policy": "lower_precision_fp"}
    if casts["high"] and all(to == f32 for _, to in casts["high"]):
        return {"policy": "fp32"}
    if casts["mixed"] and all((a, b) == (f16, f32) for a, b in casts["mixed"]):
        return {"policy": "promote"}
    arguments = [a.name for a in op._schema.arguments]
    if not any(casts.values()) and "dtype" in arguments:
        return {"policy": "fp32_set_opt_dtype"}
    calls = [c for kind, c in high if kind == "call"]
    if calls and f32 in calls[0][1]:  # went on to another overload, with a dtype
        target = _overload(calls[0][0])
        if [a.name for a in target._schema.arguments] == [*arguments, "dtype"]:
            name = target._schema.name
            overload = target._schema.overload_name
            return {
                "policy": "fp32_append_dtype",
                "redispatch": f"{name}.{overload}" if overload else name,
            }
    raise RuntimeError(f"{op}: no policy observed: {low}, {high}, {mixed}")


def _overload(name: str) -> Any:
    """``torch.ops.aten.<op>.<overload>`` for ``aten::op.overload`` (or ``aten.op.overload``)."""
    base, _, overload = name.replace("aten.", "aten::", 1).partition("::")[2].partition(".")
    return getattr(getattr(_aten, base), overload or "default")


def generate() -> dict[str, Any]:
    ops: dict[str, Any] = {}
    for name in sorted(torch._C._dispatch_get_all_op_names()):
        if not name.startswith("aten::"):
            continue
        if not torch._C._dispatch_has_kernel_for_dispatch_key(name, "AutocastCUDA"):
            continue
        ops[name] = classify(_overload(name))
    if "aten::_cudnn_rnn" not in ops:  # a build without cuDNN
        ops["aten::_cudnn_rnn"] = _CUDNN_RNN
    version = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    return {
        "torch": torch.__version__,
        "version": version,
        "generated_by": "tools/gen_autocast.py",
        "source": (
            "operators with an AutocastCUDA kernel in this torch's dispatcher "
            "(aten/src/ATen/autocast_mode.cpp, AutocastRNN.cpp); each policy observed "
            "under torch.autocast('cuda') (aten/src/ATen/autocast_mode.h CastPolicy)"
        ),
        "ops": ops,
    }


def path_for(version: str) -> Path:
    return _DATA / f"cuda_autocast_{version}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped file")
    parser.add_argument("--out", type=Path, help="write here instead of src/torchplace/data/")
    options = parser.parse_args(argv)
    table = generate()
    text = json.dumps(table, indent=1, sort_keys=True) + "\n"
    path = options.out or path_for(table["version"])
    if options.check:
        shipped = json.loads(path.read_text())
        if shipped["ops"] != table["ops"]:
            print(f"error: {path} differs from this torch's dispatcher", file=sys.stderr)
            return 1
        print(f"{path}: {len(table['ops'])} operators, as shipped")
        return 0
    path.write_text(text)
    counts: dict[str, int] = {}
    for entry in table["ops"].values():
        counts[entry["policy"]] = counts.get(entry["policy"], 0) + 1
    print(f"wrote {path}: {len(table['ops'])} operators {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
