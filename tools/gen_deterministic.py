"""Generate CUDA's deterministic-algorithm alerts for the installed torch: src/torchplace/data/.

With ``torch.use_deterministic_algorithms(True)`` a CUDA kernel without a deterministic
implementation calls ``at::globalContext().alertNotDeterministic("<caller>")``
(aten/src/ATen/Context.cpp), which raises "<caller> does not have a deterministic
implementation, but you set 'torch.use_deterministic_algorithms(True)'..." — or, with
``warn_only=True``, warns.

Which operations do is torch's own data: the list "The following normally-nondeterministic
operations will throw a RuntimeError" in the installed torch's
``torch.use_deterministic_algorithms`` docstring. Each item is joined here with the aten
operators it reaches, the caller string its CUDA kernel passes and the condition under
which it does (the table below, each row citing the ATen file and function); the generator
fails when the docstring lists an item the table does not know, so a new torch version
cannot go unnoticed. Every caller string is then looked for in the installed CUDA build's
libraries (libtorch_cuda.so, libtorch_cpu.so): one that is not there is reported and left
out (its kernel no longer alerts: 2.14.1 has a deterministic reflection_pad2d backward).
With ``--pytorch PATH`` (a PyTorch source checkout) the alert calls under
aten/src/ATen/native are listed too, and any caller the table does not know is reported.

    python tools/gen_deterministic.py                  # writes cuda_deterministic_<M.m>.json
    python tools/gen_deterministic.py --pytorch ~/src/pytorch
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

_DATA = Path(__file__).resolve().parents[1] / "src" / "torchplace" / "data"

#: docstring item (its text, normalised) -> the alerts it stands for:
#: (aten operators, caller, condition, the CPU kernel alerts alike when, source)
#: conditions: "always"; "reduction" (not Reduction::None); "mode_max" (EmbeddingBag's
#: mode 2); "floating" (a floating-point input); "weights" (a weights tensor given);
#: "prod" (reduce="prod"); "floating" counts complex too where the kernel says so (cumsum);
#: the fourth field, when the CPU kernel raises the same alert
#: ("always", "not_accumulate", or None)
_ROWS: dict[str, list[tuple[list[str], str, str, str | None, str]]] = {
    "torch.nn.AvgPool3d when attempting to differentiate a CUDA tensor": [
        (["aten::avg_pool3d_backward", "aten::avg_pool3d_backward.grad_input"],
         "avg_pool3d_backward_cuda", "always", None,
         "aten/src/ATen/native/cuda/AveragePool3d.cu avg_pool3d_backward_out_cuda"),
    ],
    "torch.nn.AdaptiveAvgPool2d when attempting to differentiate a CUDA tensor": [
        (["aten::_adaptive_avg_pool2d_backward"], "adaptive_avg_pool2d_backward_cuda",
         "always", None,
         "aten/src/ATen/native/cuda/AdaptiveAveragePooling.cu adaptive_avg_pool2d_backward_cuda"),
    ],
    "torch.nn.AdaptiveAvgPool3d when attempting to differentiate a CUDA tensor": [
        (["aten::_adaptive_avg_pool3d_backward"], "adaptive_avg_pool3d_backward_cuda",
         "always", None,
         "aten/src/ATen/native/cuda/AdaptiveAveragePooling3d.cu adaptive_avg_pool3d_backward_cuda"),
    ],
    "torch.nn.AdaptiveMaxPool2d when attempting to differentiate a CUDA tensor": [
        (["aten::adaptive_max_pool2d_backward", "aten::adaptive_max_pool2d_backward.grad_input"],
         "adaptive_max_pool2d_backward_cuda", "always", None,
         "aten/src/ATen/native/cuda/AdaptiveMaxPooling2d.cu adaptive_max_pool2d_backward_out_cuda"),
    ],
    "torch.nn.FractionalMaxPool2d when attempting to differentiate a CUDA tensor": [
        (["aten::fractional_max_pool2d_backward",
          "aten::fractional_max_pool2d_backward.grad_input"],
         "fractional_max_pool2d_backward_cuda", "always", None,
         "aten/src/ATen/native/cuda/FractionalMaxPool2d.cu fractional_max_pool2d_backward_cuda"),
    ],
    "torch.nn.FractionalMaxPool3d when attempting to differentiate a CUDA tensor": [
        (["aten::fractional_max_pool3d_backward",
          "aten::fractional_max_pool3d_backward.grad_input"],
         "fractional_max_pool3d_backward_cuda", "always", None,
         "aten/src/ATen/native/cuda/FractionalMaxPool3d.cu fractional_max_pool3d_backward_cuda"),
    ],
    "torch.nn.MaxUnpool1d": [
        (["aten::max_unpool2d", "aten::max_unpool2d.out"], "max_unpooling2d_forward_out",
         "always", "always",
         "aten/src/ATen/native/cuda/MaxUnpooling.cu max_unpooling2d_forward_out_cuda "
         "(MaxUnpool1d runs max_unpool2d)"),
    ],
    "torch.nn.MaxUnpool2d": [
        (["aten::max_unpool2d", "aten::max_unpool2d.out"], "max_unpooling2d_forward_out",
         "always", "always",
         "aten/src/ATen/native/cuda/MaxUnpooling.cu max_unpooling2d_forward_out_cuda"),
    ],
    "torch.nn.MaxUnpool3d": [
        (["aten::max_unpool3d", "aten::max_unpool3d.out"], "max_unpooling3d_forward_out",
         "always", "always",
         "aten/src/ATen/native/cuda/MaxUnpooling.cu max_unpooling3d_forward_out_cuda"),
    ],
    "torch.nn.functional.interpolate when attempting to differentiate a CUDA tensor and one of "
    "the following modes is used: linear bilinear bicubic trilinear": [
        (["aten::upsample_linear1d_backward", "aten::upsample_linear1d_backward.grad_input"],
         "upsample_linear1d_backward_out_cuda", "always", None,
         "aten/src/ATen/native/cuda/UpSampleLinear1d.cu upsample_linear1d_backward_out_cuda"),
        (["aten::upsample_bilinear2d_backward",
          "aten::upsample_bilinear2d_backward.grad_input"],
         "upsample_bilinear2d_backward_out_cuda", "always", None,
         "aten/src/ATen/native/cuda/UpSampleBilinear2d.cu upsample_bilinear2d_backward_out_cuda"),
        (["aten::upsample_bicubic2d_backward", "aten::upsample_bicubic2d_backward.grad_input"],
         "upsample_bicubic2d_backward_out_cuda", "always", None,
         "aten/src/ATen/native/cuda/UpSampleBicubic2d.cu upsample_bicubic2d_backward_out_cuda"),
        (["aten::upsample_trilinear3d_backward",
          "aten::upsample_trilinear3d_backward.grad_input"],
         "upsample_trilinear3d_backward_out_cuda", "always", None,
         "aten/src/ATen/native/cuda/UpSampleTrilinear3d.cu "
         "upsample_trilinear3d_backward_out_cuda"),
    ],
    "torch.nn.ReflectionPad1d when attempting to differentiate a CUDA tensor": [
        (["aten::reflection_pad1d_backward", "aten::reflection_pad1d_backward.grad_input"],
         "reflection_pad1d_backward_out_cuda", "always", None,
         "aten/src/ATen/native/cuda/ReflectionPad.cu reflection_pad1d_backward_out_cuda"),
    ],
    "torch.nn.ReflectionPad2d when attempting to differentiate a CUDA tensor": [
        (["aten::reflection_pad2d_backward", "aten::reflection_pad2d_backward.grad_input"],
         "reflection_pad2d_backward_cuda", "always", None,
         "aten/src/ATen/native/cuda/ReflectionPad.cu reflection_pad2d_backward_cuda"),
    ],
    "torch.nn.ReflectionPad3d when attempting to differentiate a CUDA tensor": [
        (["aten::reflection_pad3d_backward", "aten::reflection_pad3d_backward.grad_input"],
         "reflection_pad3d_backward_out_cuda", "always", None,
         "aten/src/ATen/native/cuda/ReflectionPad.cu reflection_pad3d_backward_out_cuda"),
    ],
    "torch.nn.NLLLoss when called on a CUDA tensor": [
        (["aten::nll_loss2d_forward", "aten::nll_loss2d_forward.output"],
         "nll_loss2d_forward_out_cuda_template", "reduction", None,
         "aten/src/ATen/native/cuda/NLLLoss2d.cu nll_loss2d_forward_out_cuda_template "
         "(atomicAdd in the 'sum' and 'mean' reductions)"),
    ],
    "torch.nn.CTCLoss when attempting to differentiate a CUDA tensor": [
        (["aten::_ctc_loss_backward", "aten::_ctc_loss_backward.Tensor"],
         "ctc_loss_backward_gpu", "always", None,
         "aten/src/ATen/native/cuda/LossCTC.cu ctc_loss_backward_gpu"),
    ],
    "torch.nn.EmbeddingBag when attempting to differentiate a CUDA tensor when mode='max'": [
        (["aten::_embedding_bag_backward", "aten::_embedding_bag_dense_backward"],
         "embedding_bag_backward_cuda_max", "mode_max", None,
         "aten/src/ATen/native/cuda/EmbeddingBag.cu embedding_bag_backward_cuda_max (reached "
         "from _embedding_bag_backward, which the CPU build runs as one kernel)"),
    ],
    "torch.Tensor.put_ when accumulate=False": [
        (["aten::put_", "aten::put"], "put_", "always", "not_accumulate",
         "aten/src/ATen/native/TensorAdvancedIndexing.cpp put_ (any device without "
         "accumulate; on CUDA with it too: atomicAdd)"),
    ],
    "torch.Tensor.put_ when accumulate=True and called on a CUDA tensor": [
        (["aten::put_", "aten::put"], "put_", "always", "not_accumulate",
         "aten/src/ATen/native/TensorAdvancedIndexing.cpp put_"),
    ],
    "torch.histc when called on a CUDA tensor": [
        (["aten::histc", "aten::histc.out"], "_histc_cuda with floating point input",
         "floating", None,
         "aten/src/ATen/native/cuda/SummaryOps.cu _histc_cuda (integer inputs count exactly)"),
    ],
    "torch.bincount when called on a CUDA tensor and weights tensor is given": [
        (["aten::bincount"], "_bincount_cuda", "weights", None,
         "aten/src/ATen/native/cuda/SummaryOps.cu _bincount_cuda"),
    ],
    "torch.median with indices output when called on a CUDA tensor": [
        (["aten::median.dim", "aten::median.dim_values"], "median CUDA with indices output",
         "always", None, "aten/src/ATen/native/cuda/Sorting.cpp median_with_indices_impl"),
    ],
    "torch.nn.functional.grid_sample when attempting to differentiate a CUDA tensor": [
        (["aten::grid_sampler_2d_backward"], "grid_sampler_2d_backward_cuda", "always", None,
         "aten/src/ATen/native/cuda/GridSampler.cpp grid_sampler_2d_backward_cuda"),
        (["aten::grid_sampler_3d_backward"], "grid_sampler_3d_backward_cuda", "always", None,
         "aten/src/ATen/native/cuda/GridSampler.cpp grid_sampler_3d_backward_cuda"),
    ],
    "torch.Tensor.scatter_reduce when reduce='prod' and called on CUDA tensor": [
        (["aten::scatter_reduce.two", "aten::scatter_reduce_.two"],
         "scatter_reduce_cuda_kernel", "prod", None,
         "aten/src/ATen/native/cuda/ScatterGatherKernel.cu scatter_reduce_two_cuda_kernel"),
    ],
    # 2.13's list (2.14's cumsum is deterministic)
    "torch.cumsum when called on a CUDA tensor when dtype is floating point or complex": [
        (["aten::cumsum", "aten::cumsum_", "aten::cumsum.out"], "cumsum_cuda_kernel",
         "floating", None, "aten/src/ATen/native/cuda/ScanKernels.cpp cumsum_cuda_kernel"),
    ],
    # quantized tensors are not simulated on a GPU
    "torch.Tensor.resize_ when called with a quantized tensor": [],
}  # fmt: skip

#: warnings (not in the docstring): the attention kernels' backward with warn_only=True
#: (aten/src/ATen/native/transformers/cuda/attention_backward.cu, TORCH_WARN_ONCE)
_ONCE = {
    "aten::_scaled_dot_product_efficient_attention_backward": (
        "Memory Efficient attention defaults to a non-deterministic algorithm. "
        "To explicitly enable determinism call torch.use_deterministic_algorithms(True, "
        "warn_only=False)."
    ),
    "aten::_scaled_dot_product_flash_attention_backward": (
        "Flash Attention defaults to a non-deterministic algorithm. To explicitly enable "
        "determinism call torch.use_deterministic_algorithms(True, warn_only=False)."
    ),
    "aten::_scaled_dot_product_cudnn_attention_backward": (
        "cuDNN Attention defaults to a non-deterministic algorithm. To explicitly enable "
        "determinism call torch.use_deterministic_algorithms(True, warn_only=False)."
    ),
}


def docstring_items(doc: str) -> list[str]:
    """The bullets under "will throw a :class:`RuntimeError`", as plain text."""
    part = doc.split("normally-nondeterministic operations will throw a")[1]
    part = part.split("In addition,")[0]
    items: list[str] = []
    for line in part.splitlines():
        text = line.strip()
        if text.startswith("* "):
            items.append(text[2:])
        elif text.startswith("- ") and items:
            items[-1] += " " + text[2:]
        elif text and items and not text.startswith(":class:`RuntimeError`"):
            items[-1] += " " + text
    return [_plain(i) for i in items]


def _plain(text: str) -> str:
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text)
    text = text.replace("``", "").replace("`", "")
    return re.sub(r"\s+", " ", text).strip().rstrip(":")


def _libraries() -> list[Path]:
    lib = Path(torch.__file__).parent / "lib"
    return [p for p in (lib / "libtorch_cuda.so", lib / "libtorch_cpu.so") if p.exists()]


def _strings(paths: list[Path]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        out = subprocess.run(
            ["strings", "-n", "4", str(path)], capture_output=True, text=True, check=True
        ).stdout
        found.update(out.splitlines())
    return found


def _meta_alerts(name: str) -> bool:
    """Whether torch's own meta function of the operator raises the alert itself (its
    placeholder-values run then needs no second one): torch/_meta_registrations.py."""
    import inspect

    from torch._decomp import meta_table

    base, _, overload = name.partition("::")[2].partition(".")
    packet = getattr(torch.ops.aten, base, None)
    op = getattr(packet, overload or "default", None) if packet is not None else None
    fn = meta_table.get(op) if op is not None else None
    return fn is not None and "alert_not_deterministic" in inspect.getsource(fn)


def checkout_callers(root: Path) -> set[str]:
    """Caller strings of the alertNotDeterministic calls in a PyTorch checkout's ATen."""
    callers: set[str] = set()
    native = root / "aten" / "src" / "ATen" / "native"
    for path in native.rglob("*"):
        if path.suffix in (".cpp", ".cu", ".h", ".cuh"):
            text = path.read_text(errors="replace")
            callers.update(re.findall(r'alertNotDeterministic\(\s*"([^"]+)"', text))
    return callers


def generate(pytorch: Path | None = None, *, verify: bool = True) -> dict[str, Any]:
    """The table; ``verify=False`` skips the search of the libraries (tens of seconds)."""
    doc = torch.use_deterministic_algorithms.__doc__ or ""
    items = docstring_items(doc)
    unknown = [i for i in items if i not in _ROWS]
    if unknown:
        raise SystemExit(f"error: the docstring lists items this table lacks: {unknown}")
    libraries = _libraries() if verify else []
    cuda_build = any(p.name == "libtorch_cuda.so" for p in libraries)
    strings = _strings(libraries) if cuda_build else set()
    ops: dict[str, list[dict[str, Any]]] = {}
    dropped: list[str] = []
    for item in items:
        for names, caller, condition, cpu_also, source in _ROWS[item]:
            # the linker shares string tails ("put_" lies inside "index_put_")
            if cuda_build and not any(s.endswith(caller) for s in strings):
                dropped.append(caller)
                continue
            for name in names:
                entry = {"caller": caller, "when": condition, "source": source}
                if cpu_also:
                    entry["cpu_also"] = cpu_also
                if _meta_alerts(name):
                    entry["meta_also"] = True
                if entry not in ops.setdefault(name, []):
                    ops[name].append(entry)
    for name, message in _ONCE.items():
        if not cuda_build or message.split(". ")[0] + ". " in strings:
            ops.setdefault(name, []).append({"warn_once": message, "when": "warn_only"})
    if pytorch is not None:
        known = {caller for rows in _ROWS.values() for _, caller, *_ in rows}
        extra = sorted(checkout_callers(pytorch) - known)
        print(f"alert callers in {pytorch} not in the docstring's list: {extra}")
    version = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    return {
        "torch": torch.__version__,
        "version": version,
        "generated_by": "tools/gen_deterministic.py",
        "source": "torch.use_deterministic_algorithms's docstring (the operations that throw), "
        "each joined with its CUDA kernel's alertNotDeterministic call",
        "verified_in_libraries": cuda_build,
        "dropped_not_in_libraries": sorted(set(dropped)),
        "ops": dict(sorted(ops.items())),
    }


def path_for(version: str) -> Path:
    return _DATA / f"cuda_deterministic_{version}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pytorch", type=Path, help="a PyTorch source checkout to list too")
    parser.add_argument("--out", type=Path, help="write here instead of src/torchplace/data/")
    options = parser.parse_args(argv)
    table = generate(options.pytorch)
    path = options.out or path_for(table["version"])
    path.write_text(json.dumps(table, indent=1) + "\n")
    print(
        f"wrote {path}: {len(table['ops'])} operators"
        + (f"; left out (not in the libraries): {table['dropped_not_in_libraries']}")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
