"""Generate the simulator's CUDA operator table from a CUDA build of torch, without a GPU.

What a GPU refuses in its host code (a kernel the build lacks, a dtype a kernel's
``AT_DISPATCH`` switch lacks, any other check a CUDA kernel makes before it launches) is
learned by running that host code: the CUDA build of torch, with the CUDA runtime, NVRTC
and driver libraries it links replaced by ``tools/host_only_cudart.c`` (one device of
compute capability 9.0; memory is host memory; kernels launch and do nothing). PyTorch's
own OpInfo samples (``op_db``, with the CUDA dtype lists PyTorch's CI checks on GPUs) are
the calls: each (operator, dtype, sample) runs on that "cuda" device and on the CPU, under
a dispatch mode that records every aten call below autograd (where the simulator's own
dispatch mode sees them), its signature (the dtypes of its tensors, then its ``dtype``
arguments and mode names such as ``reduce="amax"``) and where an error was raised. The
dispatcher lists the operators the build has no CUDA kernel for. From that:

- ``src/torchplace/data/cuda-ops-<major>.<minor>.json.gz`` (package data; the simulator
  looks it up per operator, :mod:`torchplace.sim.rules._cuda_ops`): the signatures CUDA refuses,
  with the exception it raised; the operators it has no kernel for; the signatures CUDA
  runs and the CPU build refuses (computed in a wider dtype).
- ``benchmarks/data/opinfo-cuda-<major>.<minor>.json.gz``: what CUDA did with every case
  (ran, with which output shapes and dtypes, or raised what), OpInfo's CUDA and CPU dtype
  lists as the CUDA build evaluates them, and the device-mixing cases (one tensor left on
  the host): ``benchmarks/opinfo_sweep.py`` compares the simulator with it.

Where the mapping is uncertain: an error raised after the host code handed work to a CUDA
library (cuBLAS, cuDNN, cuFFT, cuSOLVER: their handles cannot be made without a device) or
a kernel counts as "runs": whatever the library would refuse is not learned, and OpInfo's
lists are the only word on it (the sweep reports where they disagree). A signature is
refused only if every sample that reached it was refused with the same text, and, unless
the text is one of the dispatcher's or ``AT_DISPATCH``'s dtype errors, the CPU ran the
same call on some sample (so the refusal is CUDA's, not the sample's). Values a kernel
would compute are never computed: the runtime counts the device-to-host copies of bytes the
host did not write (``host_only_uncomputed_reads``), and an outcome that followed one (an
error of the operator's own value check, or a run where the CPU refused the sample's
values) is not decided.

Run (about 5 minutes a torch version on one core; needs gcc and a CUDA build of torch,
whose wheel ships ``driver_types.h``, and ``expecttest``, which OpInfo imports)::

    python tools/gen_cuda_ops.py --python /path/to/cuda-venv/bin/python
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent

# Errors raised after torch's host code handed the work to the device or a CUDA library:
# the call passed every check torch makes; what the library would decide is unknown.
DEVICE_ERRORS = re.compile(
    r"host-only CUDA runtime|CUBLAS_STATUS|CUDNN_STATUS|cuDNN error|CUFFT_|cuFFT error|"
    r"CUSOLVER|cusolver|CUSPARSE|cusparse|CURAND|NVRTC|nvrtc|MAGMA|magma|triton|Triton|"
    r"CUDA out of memory|CUDA driver|CUDA error|no kernel image"
)
# the dispatcher's and AT_DISPATCH's texts: they depend on the dtype alone
STANDARD = re.compile(r"\" not implemented for '|^Could not run '")
#: a c10 ScalarType's name (c10/core/ScalarType.h), as a refusal of a dtype writes it
SCALAR_TYPE = re.compile(
    r"\b(Bool|Byte|Char|Short|Int|Long|Half|Float|Double|BFloat16|ComplexHalf|ComplexFloat|"
    r"ComplexDouble|Float8_\w+|UInt\d+|Bits\w+)\b"
)
TIMEOUT_S = 60  # one sample on the host-only runtime (a hang is recorded, not waited on)


# --- the host-only CUDA runtime ------------------------------------------------------------


#: the libraries replaced (soname stem -> the -D that selects its part of the C file, the
#: code its undefined functions return: "not supported" or the library's nearest)
FAKED = {
    "libcudart": ("PART_CUDART", 801),  # cudaErrorNotSupported
    "libnvrtc": ("PART_NVRTC", 6),  # NVRTC_ERROR_COMPILATION
    "libcudnn": ("PART_CUDNN", 3000),  # CUDNN_STATUS_NOT_SUPPORTED
    "libcufft": ("PART_CUFFT", 5),  # CUFFT_INTERNAL_ERROR
}
_STUB_CREATE = re.compile(r"^cudnnCreate\w*Descriptor$")
_STUB_OK = re.compile(
    r"^cudnn(Set|Destroy)|^cudnnBackend(SetAttribute|DestroyDescriptor)$|^cudnnRestoreDropout"
)


def build_runtime(python: str, workdir: Path) -> dict[str, str]:
    """Compile tools/host_only_cudart.c for the CUDA build ``python`` runs; the environment
    that loads it in place of the CUDA runtime, NVRTC, cuDNN, cuFFT and the driver."""
    probe = (
        "import glob, os, nvidia, torch\n"
        "roots = [p for r in nvidia.__path__ for p in glob.glob(os.path.join(r, '*'))]\n"
        "inc = [p for r in roots\n"
        "       for p in glob.glob(os.path.join(r, 'include', 'driver_types.h'))]\n"
        "rt = [p for r in roots for p in glob.glob(os.path.join(r, 'lib', 'libcudart.so.*'))]\n"
        "cudnn = torch._C._cudnn.getCompileVersion()\n"
        "print(os.path.dirname(inc[0]), rt[0].rsplit('.', 1)[1], os.path.dirname(torch.__file__),\n"
        "      cudnn[0] * 10000 + cudnn[1] * 100 + cudnn[2])\n"
    )
    found = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    if found.returncode != 0 or not found.stdout.strip():
        raise SystemExit(
            f"error: {python} is not a CUDA build of torch with the nvidia wheels "
            f"(driver_types.h, libcudart.so.N):\n{found.stderr[-2000:]}\n"
            "hint: pass --python with a venv that has torch's CUDA wheel installed"
        )
    import opinfo_cases as cases  # this directory

    include, major, torch_dir, cudnn = found.stdout.split()
    # driver_types.h includes crt/host_defines.h, which the runtime wheel does not ship:
    # the host compiler needs none of its definitions
    shim = workdir / "crt"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "host_defines.h").write_text(
        "".join(
            f"#define {m}\n"
            for m in (
                "__device_builtin__",
                "__cudart_builtin__",
                "CUDARTAPI",
                "CUDARTAPI_CDECL",
                "__host__",
                "__device__",
                "__device_builtin_surface_type__",
                "__device_builtin_texture_type__",
                "CUDA_CB",
                "__dv(v)",
            )
        )
        + "#define __align__(n) __attribute__((aligned(n)))\n"
        + "#define __builtin_align__(n) __attribute__((aligned(n)))\n"
    )
    imports = _imports(Path(torch_dir) / "lib")
    flags = [
        f"-DCUDA_MAJOR={major}",
        f"-DCUDNN_VERSION_NUM={cudnn}",
        f"-I{workdir}",
        f"-I{include}",
    ]
    preload = []
    for stem, (part, fails) in FAKED.items():
        nodes = [n for n in imports if n.startswith(stem + ".so.")]
        if not nodes:
            continue
        soname = nodes[0]
        library = workdir / soname
        _compile(library, soname, [f"-D{part}", *flags], soname, workdir)
        missing = sorted(imports[soname] - _defined(library))
        (workdir / "stubs.h").write_text("".join(_stub(name, fails) for name in missing))
        _compile(library, soname, [f"-D{part}", "-DSTUBS", *flags], soname, workdir)
        preload.append(str(library))
    _compile(workdir / "libcuda.so.1", "libcuda.so.1", ["-DPART_DRIVER", *flags], None, workdir)
    env = dict(os.environ)
    env.update(
        LD_PRELOAD=":".join(preload),
        LD_LIBRARY_PATH=f"{workdir}:{env.get('LD_LIBRARY_PATH', '')}",
        PYTORCH_NO_CUDA_MEMORY_CACHING="1",  # every block a fresh calloc: reads see zeros
        TRITON_CACHE_DIR=str(workdir / "triton"),
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(HERE), env.get("PYTHONPATH", "")]),
        PYTHONHASHSEED=cases.HASH_SEED,  # the samples in one order, whoever runs this
    )
    return env


def _imports(lib_dir: Path) -> dict[str, set[str]]:
    """Version node (``libcudnn.so.9``) -> the functions torch's libraries import from it."""
    found: dict[str, set[str]] = collections.defaultdict(set)
    for path in sorted(lib_dir.glob("*.so*")):
        listed = subprocess.run(
            ["nm", "-D", "--undefined-only", str(path)], capture_output=True, text=True
        )
        for line in listed.stdout.splitlines():
            name, _, node = line.split()[-1].partition("@")
            if node:
                found[node].add(name)
    return found


def _defined(library: Path) -> set[str]:
    listed = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True
    )
    return {line.split()[-1].split("@")[0] for line in listed.stdout.splitlines()}


def _stub(name: str, fails: int) -> str:
    if _STUB_CREATE.match(name):
        return f"EXPORT int {name}(void **p) {{ *p = handle(); return OK; }}\n"
    if _STUB_OK.match(name):
        return f"EXPORT int {name}(void) {{ return OK; }}\n"
    return f"EXPORT int {name}(void) {{ return {fails}; }}\n"


def _compile(out: Path, soname: str, flags: list[str], node: str | None, workdir: Path) -> None:
    script = workdir / f"{soname}.map"
    script.write_text(f"{node or ''} {{ global: *; }};\n")
    cmd = [
        "gcc", "-O1", "-shared", "-fPIC", *flags, f"-Wl,-soname,{soname}",
        f"-Wl,--version-script={script}", "-o", str(out), str(HERE / "host_only_cudart.c"),
    ]  # fmt: skip
    built = subprocess.run(cmd, capture_output=True, text=True)
    if built.returncode != 0:
        raise SystemExit(f"error: gcc failed ({' '.join(cmd)}):\n{built.stderr[-3000:]}")


# --- the worker: runs inside the CUDA build, with the host-only runtime ----------------------


def worker(start: int, start_dtype: int) -> None:
    """Print one JSON line per (operator, dtype) from op ``start``, dtype ``start_dtype``."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    import opinfo_cases as cases  # this directory
    from torchplace.cost import call_tensors
    from torchplace.sim.rules._cuda_ops import (
        call_class,
        device_pattern,
        function_key,
        signature,
        signature_text,
    )

    class Recorder(TorchDispatchMode):
        """Each aten call's (overload, signature) that ran, and the first that raised."""

        def __init__(self) -> None:
            super().__init__()
            self.ran: dict[tuple[str, str], None] = {}
            self.failed: tuple[str, str] | None = None
            self.dynamic = False  # an output shape depends on values (never computed here)
            self.read = False  # the host read a value from the device (a kernel's: zero)
            self.mixed: dict[tuple[str, str], Any] = {}  # (op, device pattern) -> outcome

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            name = f"{func._schema.name}.{func._overloadname}"
            tensors = call_tensors(args, kwargs)
            shape = call_class(tensors, func, args, kwargs)
            sig = signature_text(signature(tensors, args, kwargs), shape)
            on_cuda = [t.device.type == "cuda" for t in tensors]
            pattern = device_pattern(tensors, on_cuda) if any(on_cuda) else None
            try:
                out = func(*args, **kwargs)
            except BaseException as e:
                if self.failed is None:
                    self.failed = (name, sig)
                    if pattern is not None and ("h" in pattern or "s" in pattern):
                        self.mixed[(name, pattern)] = [type(e).__name__, str(e).split("\n")[0]]
                raise
            self.ran[(name, sig)] = None
            if pattern is not None and ("h" in pattern or "s" in pattern):
                self.mixed[(name, pattern)] = "ok"
            dynamic = torch.Tag.dynamic_output_shape in func.tags
            if any(on_cuda) and (
                dynamic or name.startswith(("aten::_local_scalar", "aten::equal"))
            ):
                self.read = True
            if any(on_cuda) and name.startswith(("aten::_to_copy", "aten::copy_")):
                outs = out if isinstance(out, torch.Tensor) else None
                self.read = self.read or (outs is not None and outs.device.type == "cpu")
            self.dynamic = self.dynamic or dynamic or name.startswith("aten::_local_scalar")
            return out

    class Functions(TorchFunctionMode):
        """The torch functions a sample calls (above autograd) and the one that raised."""

        def __init__(self) -> None:
            super().__init__()
            self.raised_in: str | None = None

        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            try:
                return func(*args, **(kwargs or {}))
            except BaseException:
                if self.raised_in is None:
                    self.raised_in = function_key(func)
                raise

    def timeout(*_: Any) -> None:
        raise TimeoutError(f"no answer in {TIMEOUT_S} s")

    signal.signal(signal.SIGALRM, timeout)

    # the host-only runtime counts device-to-host copies of bytes no kernel computed: reads
    # inside an operator's own host code (a value check), which the Recorder does not see
    uncomputed_reads = ctypes.CDLL(None).host_only_uncomputed_reads
    uncomputed_reads.restype = ctypes.c_long

    def run(op: Any, sample: Any) -> dict[str, Any]:
        rec, functions = Recorder(), Functions()
        signal.alarm(TIMEOUT_S)
        uncomputed_reads()
        try:
            with functions, rec:
                out = cases.call(op, sample)
            result: Any = "ok"
            shapes = None if rec.dynamic else cases.outputs(out)
        except Exception as e:
            text = str(e)
            result = "device" if DEVICE_ERRORS.search(text) else [type(e).__name__, text]
            shapes = None
        finally:
            signal.alarm(0)
        uncomputed = uncomputed_reads() > 0
        if (rec.read or uncomputed) and isinstance(result, list) and not STANDARD.search(result[1]):
            result = "values"  # an error after a read of values no kernel computed
        found = {
            "ran": [list(k) for k in rec.ran],
            "failed": rec.failed,
            "result": result,
            "raised_in": functions.raised_in,
            "mixed": [[op, p, r] for (op, p), r in rec.mixed.items()],
            "uncomputed": uncomputed,
        }
        if shapes is not None:
            found["out"] = shapes
        return found

    op_list = cases.ops()
    print(json.dumps({"meta": {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "ops": len(op_list),
        "dtypes": len(cases.DTYPES),
        "opinfo": {
            cases.key(op): {
                "cuda": sorted(str(d)[6:] for d in op.supported_dtypes("cuda")),
                "cpu": sorted(str(d)[6:] for d in op.supported_dtypes("cpu")),
            }
            for op in op_list
        },
        "no_kernel": no_kernel_messages(),
    }}), flush=True)  # fmt: skip
    for i in range(start, len(op_list)):
        op = op_list[i]
        mixing_dtype = None  # device mixing: in one dtype per operator, the first that runs
        for j, dtype in enumerate(cases.DTYPES):
            if i == start and j < start_dtype:
                continue
            line: dict[str, Any] = {"i": i, "j": j, "op": cases.key(op), "dtype": dtype}
            try:
                samples = cases.samples(op, dtype)
            except Exception as e:
                line["nosamples"] = f"{type(e).__name__}: {str(e)[:300]}"
                print(json.dumps(line), flush=True)
                continue
            found = []
            mixed = 0
            for sample in samples:
                entry: dict[str, Any] = {"id": cases.fingerprint(sample), "cpu": run(op, sample)}
                try:
                    entry["cuda"] = run(op, cases.moved(sample, "cuda"))
                except Exception as e:  # the move itself failed
                    entry["cuda"] = {
                        "result": [type(e).__name__, str(e)],
                        "ran": [],
                        "failed": None,
                    }
                if (
                    mixing_dtype in (None, dtype)
                    and mixed < cases.MIXING_SAMPLES
                    and entry["cuda"]["result"] in ("ok", "device")
                    and cases.tensor_count(sample) > 1
                ):
                    entry["mixing"] = mixing(op, sample, run)
                    mixing_dtype, mixed = dtype, mixed + 1
                found.append(entry)
            line["samples"] = found
            print(json.dumps(line), flush=True)


def mixing(op: Any, sample: Any, run: Any) -> list[Any]:
    """The sample with its p-th tensor left on the host, the rest on "cuda"."""
    import opinfo_cases as cases

    out = []
    n = cases.tensor_count(sample)
    for p in range(min(n, cases.MIXING_POSITIONS)):
        try:
            found = run(op, cases.moved(sample, "cuda", host=p))
        except Exception as e:
            found = {"result": [type(e).__name__, str(e)]}
        out.append(
            {
                "host": p,
                "result": found["result"],
                "out": found.get("out"),
                "above": found["failed"] is None and isinstance(found["result"], list),
                "raised_in": found.get("raised_in"),
                "mixed": found.get("mixed", []),
            }
        )
    return out


def no_kernel_messages() -> dict[str, tuple[str, bool]]:
    """Operators with a CPU or Meta kernel and none the CUDA key reaches: the dispatcher's
    table (OperatorEntry::dumpComputedTable, c10/core/dispatch/OperatorEntry.cpp, which its
    "Could not run" error prints) and whether a CPU kernel exists."""
    import torch

    has = torch._C._dispatch_has_computed_kernel_for_dispatch_key
    out = {}
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::") or has(name, "CUDA"):
            continue
        if not (has(name, "CPU") or has(name, "Meta")):
            continue
        key = name if "." in name else name + ".default"
        out[key] = (torch._C._dispatch_dump_table(name), has(name, "CPU"))
    return out


# --- the parent: runs the worker, restarts it after a crash, writes the tables ---------------


def collect(python: str, env: dict[str, str], out_path: Path) -> None:
    """Run the worker to the end, one line per (op, dtype) into ``out_path``; a crash
    records the (op, dtype) it happened in and the worker goes on from the next."""
    start, start_dtype = 0, 0
    ndtypes = total = 0
    with out_path.open("w") as out:
        while True:
            cmd = [python, str(Path(__file__).resolve()), "--worker", str(start), str(start_dtype)]
            proc = subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
            )
            assert proc.stdout is not None
            last = None
            for line in proc.stdout:
                out.write(line)
                record = json.loads(line)
                if "meta" in record:
                    total, ndtypes = record["meta"]["ops"], record["meta"]["dtypes"]
                else:
                    last = (record["i"], record["j"])
            rc = proc.wait()
            if rc == 0:
                return
            crashed = (start, start_dtype) if last is None else _next(last, ndtypes)
            out.write(json.dumps({"i": crashed[0], "j": crashed[1], "crash": rc}) + "\n")
            print(f"worker stopped (exit {rc}) at op {crashed[0]} dtype {crashed[1]}; going on")
            start, start_dtype = _next(crashed, ndtypes)
            if start >= total:
                return


def _next(at: tuple[int, int], ndtypes: int) -> tuple[int, int]:
    return (at[0], at[1] + 1) if at[1] + 1 < ndtypes else (at[0] + 1, 0)


class _Observed:
    """What the samples did at one (aten overload, signature)."""

    __slots__ = ("cpu_failed", "cpu_ran", "cuda_failed", "cuda_ran", "failed_in", "library")

    def __init__(self) -> None:
        self.cuda_ran = 0  # CUDA's host code ran it (or handed it to a library OpInfo says works)
        self.library = 0  # handed to a library, for a dtype OpInfo says CUDA lacks
        self.cpu_ran = 0
        self.cpu_failed = 0
        self.cuda_failed: collections.Counter[tuple[str, str]] = collections.Counter()
        self.failed_in: set[tuple[str, int]] = set()  # (OpInfo case, sample) where it raised


def tables(raw: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the simulator's table, the sweep's ground truth) from the worker's lines."""
    meta: dict[str, Any] = {}
    seen: dict[tuple[str, str], _Observed] = collections.defaultdict(_Observed)
    # (aten overload, device pattern) -> CUDA's outcomes there
    patterns: dict[tuple[str, str], list[Any]] = collections.defaultdict(list)
    # torch function -> where CUDA's path differs from the CPU's: CUDA's errors there, the
    # dtypes of the samples it differed for, whether mixing devices made it differ
    paths: dict[str, dict[str, Any]] = collections.defaultdict(
        lambda: {"texts": set(), "dtypes": set(), "mixing": False, "refuse": {}}
    )
    ran_in: dict[str, set[tuple[str, int]]] = collections.defaultdict(set)  # op -> cases
    truth: dict[str, Any] = {}
    crashes = []
    with raw.open() as f:
        for line in f:
            record = json.loads(line)
            if "meta" in record:
                meta = record["meta"]
                continue
            if "crash" in record:
                crashes.append(record)
                continue
            cases = truth.setdefault(record["op"], {"samples": {}, "mixing": []})
            if "nosamples" in record:
                continue
            supported = record["dtype"] in meta["opinfo"][record["op"]]["cuda"]
            outcomes = []
            for k, s in enumerate(record["samples"]):
                case = (record["op"], k)
                _observe(seen, ran_in, case, s["cpu"], s["cuda"], supported)
                _above_dispatch(paths, s["cpu"], s["cuda"], record["dtype"])
                for run in [s["cuda"], *(s.get("mixing") or ())]:
                    for op, pattern, outcome in run.get("mixed", ()):
                        if run["result"] in ("device", "values"):
                            outcome = "ok"  # it passed the host code's device checks
                        patterns[(op, pattern)].append(outcome)
                outcome = _outcome(s["cuda"], supported)
                cpu = s["cpu"]["result"]
                if (
                    outcome["result"] == "ok"
                    and s["cuda"].get("uncomputed")
                    and isinstance(cpu, list)
                    and not STANDARD.search(cpu[1])
                ):
                    # CUDA ran after reading values no kernel computed, where the CPU refused
                    # the sample (its values: a median of fully masked rows): not decided
                    outcome = {"result": "unknown"}
                if "id" in s:  # the sample's fingerprint (opinfo_cases.fingerprint)
                    outcome["id"] = s["id"]
                if isinstance(outcome["result"], list) and s["cpu"]["result"] == "ok":
                    outcome["_only_cuda"] = s["cuda"]["failed"]  # decided below
                outcomes.append(outcome)
                for m in s.get("mixing") or ():
                    if m.get("above") and m.get("raised_in"):
                        path = paths[m["raised_in"]]
                        path["texts"].add(_first_line(m["result"][1]))
                        path["mixing"] = True
                if s.get("mixing"):
                    cases["mixing"].append(
                        {
                            "dtype": record["dtype"],
                            "sample": k,
                            "id": s.get("id"),
                            "cases": [
                                {"host": m["host"], "result": _result(m["result"]), "out": m["out"]}
                                for m in s["mixing"]
                            ],
                        }
                    )
            cases["samples"][record["dtype"]] = outcomes
            _refused_everywhere(paths, record["dtype"], record["samples"])
    for name, info in meta["opinfo"].items():
        truth.setdefault(name, {"samples": {}, "mixing": []}).update(info)

    messages: list[str] = []
    index: dict[str, int] = {}

    def message(text: str) -> int:
        if text not in index:
            index[text] = len(messages)
            messages.append(text)
        return index[text]

    # By (operator, dtypes): the shape classes ("" for most calls, "empty", "filled",
    # "scalar": many CUDA kernels return before their dtype switch for these) the samples
    # reached.
    by_dtypes: dict[tuple[str, str], dict[str, _Observed]] = collections.defaultdict(dict)
    for (op, sig), o in seen.items():
        base, shape = _shape_class(sig)
        by_dtypes[(op, base)][shape] = o
    refuse: dict[str, dict[str, Any]] = collections.defaultdict(dict)
    widen: dict[str, list[str]] = collections.defaultdict(list)
    alternatives: dict[str, dict[str, Any]] = collections.defaultdict(dict)
    conditional, library = [], []
    for (op, sig), shapes in sorted(by_dtypes.items()):
        failed = collections.Counter()
        for o in shapes.values():
            failed.update(o.cuda_failed)
        # the shape classes CUDA ran it in: exempt from a refusal (an empty product returns
        # before the dtype switch); the plain class ("") decides whether it is refused
        runs = sorted(c for c, o in shapes.items() if o.cuda_ran)
        mixed = [c for c in runs if shapes[c].cuda_failed and c == ""]
        plain = shapes.get("")
        if plain is not None and plain.cuda_failed:
            failed = plain.cuda_failed.copy()  # the text of the calls that matter most
        # refused on every sample, with one text or several that each refuse a dtype (name
        # it): the kernel CUDA picks can depend on an argument the signature does not key
        # (AT_DISPATCH's name: "leaky_relu_cuda" / "rrelu_with_noise_out_cuda"; a
        # convolution's backend, chosen by aten/src/ATen/native/Convolution.cpp's
        # select_conv_backend from its groups and dilation: cuDNN's
        # "getCudnnDataTypeFromScalarType() not supported for Long", the depthwise or slow
        # kernel's AT_DISPATCH error); the most common text stands for them
        of_dtype = all(STANDARD.search(t) or SCALAR_TYPE.search(t) for _, t in failed)
        if failed and (len(failed) == 1 or of_dtype) and not mixed and runs != sorted(shapes):
            (kind, text), _ = failed.most_common(1)[0]
            # a text of its own is CUDA's refusal of the dtype only if the same sample ran
            # through this operator in another dtype (else it may be the sample's values,
            # which the host-only runtime's kernels never compute)
            failed_in = set().union(*(o.failed_in for o in shapes.values()))
            if STANDARD.search(text) or failed_in & ran_in[op]:
                # refused, but in the shape classes where CUDA was seen to run it; an empty
                # input with a non-empty result ("filled") no sample reached takes the
                # empty class's verdict
                exempt = runs
                if "empty" in runs and "filled" not in shapes:
                    exempt = sorted([*runs, "filled"])
                refuse[op][sig] = [kind, message(text), exempt]
                if len(failed) > 1:  # each backend's text (sim/rules/_backends.py picks one)
                    texts = [[k, message(t)] for (k, t), _ in failed.most_common()]
                    alternatives[op][sig] = texts
            else:
                conditional.append([op, sig, "values or shapes", text[:300]])
        elif failed:
            for _, text in failed:
                conditional.append([op, sig, "some samples", text[:300]])
        elif any(o.library for o in shapes.values()) and not runs:
            library.append([op, sig])
        # CUDA runs it (in some shapes, where it also refuses others) and the CPU does not
        if (
            sig not in refuse.get(op, {})
            and (runs or mixed)
            and any(o.cpu_failed for o in shapes.values())
        ):
            widen[op].append(sig)

    # A CUDA error where the CPU ran the same sample, that no dtype refusal and no path
    # explains, may come from values the host-only runtime never computed (a kernel's
    # output reads as zero: "repeats can not be negative") or from an argument the table
    # does not key on (linalg.lstsq's driver): the sweep counts it as undecided.
    explained = {t for v in paths.values() for t in v["texts"]}
    for cases in truth.values():
        for outcomes in cases["samples"].values():
            for o in outcomes:
                failed = o.pop("_only_cuda", None)
                if failed is None or STANDARD.search(o["result"][1]):
                    continue
                base = _shape_class(failed[1])[0]
                if (
                    base not in refuse.get(failed[0], {})
                    and _first_line(o["result"][1]) not in explained
                ):
                    o["result"] = "unknown"

    # device mixing, per operator: the patterns CUDA ran, and those it refused (every time,
    # with one text: the first line of it, device indices left out)
    mixing: dict[str, dict[str, Any]] = collections.defaultdict(lambda: {"allow": [], "refuse": {}})
    for (op, pattern), outcomes in sorted(patterns.items()):
        errors = {tuple(o) for o in outcomes if o != "ok"}
        if "ok" in outcomes and not errors:
            mixing[op]["allow"].append(pattern)
        elif len(errors) == 1 and "ok" not in outcomes:
            kind, text = errors.pop()
            mixing[op]["refuse"][pattern] = [kind, message(text)]

    # "Could not run": the dispatcher's text (its template taken from a sample that raised
    # it, the backends and table from the dispatcher), for operators a CUDA program reaches.
    # An operator the samples reached only on the CPU (a CPU kernel's own path, which CUDA
    # takes another way: mkldnn, the CPU's flash attention) is left out.
    template = _could_not_run_template(seen)
    cuda_reached = {op for (op, _), o in seen.items() if o.cuda_ran or o.cuda_failed}
    cpu_only = {op for (op, _), o in seen.items() if o.cpu_ran} - cuda_reached
    no_kernel = {}
    for op, (dump, has_cpu) in sorted(meta["no_kernel"].items()):
        if (
            op in cpu_only
            or not has_cpu
            or (op not in cuda_reached and re.search(r"cpu|mkldnn", op))
        ):
            continue
        if template is not None:
            name = op.removesuffix(".default")
            keys = ", ".join(line.split(":", 1)[0] for line in dump.splitlines() if line.strip())
            no_kernel[op] = message(template.format(name=name, keys=keys, table=dump))
    runtime = {
        "torch": meta["torch"],
        "cuda": meta["cuda"],
        "generated_by": "tools/gen_cuda_ops.py",
        "refuse": dict(refuse),
        "alternatives": dict(alternatives),
        "no_kernel": no_kernel,
        "widen": dict(widen),
        "mixing": dict(mixing),
        "paths": {
            k: {
                "texts": sorted(v["texts"]),
                "dtypes": sorted(v["dtypes"]),
                "mixing": v["mixing"],
                "refuse": v["refuse"],
            }
            for k, v in sorted(paths.items())
        },
        "messages": messages,
    }
    sweep = {
        "torch": meta["torch"],
        "cuda": meta["cuda"],
        "generated_by": "tools/gen_cuda_ops.py",
        "ops": truth,
        "conditional": conditional,
        "library": library,
        "crashes": crashes,
    }
    return runtime, sweep


def _classed(run: dict[str, Any]) -> list[tuple[str, str]]:
    """The (operator, signature) pairs a run reached, a factory's (a call without tensor
    arguments, or one with a ``device`` argument whose tensors are numbers) with the shape
    class of its result where the record lacks it (records made before the worker wrote
    it, :func:`torchplace.sim.rules._cuda_ops.call_class`): the run's outputs, all empty
    ("empty") or of one element ("scalar"), are the factory's."""
    shapes = [s for s, _, _ in run.get("out") or ()]
    sizes = [_numel(s) for s in shapes]
    shape = "empty" if sizes and max(sizes) == 0 else "scalar" if sizes and max(sizes) == 1 else ""
    found = []
    for op, sig in run["ran"]:
        base, known = _shape_class(sig)
        tensorless = base.split("|=", 1)[0] == ""
        if (tensorless and not known) or (known == "scalar" and _is_factory(op)):
            sig = f"{base}|{shape}" if shape else base
        found.append((op, sig))
    return found


def _failed_class(failed: list[str]) -> tuple[str, str]:
    """The (operator, signature) a run raised in; a factory whose tensors are numbers, in a
    record made before the worker classed it by its result ("scalar" by its 0-dim
    tensors), is taken as having a result of several elements: CUDA's factory kernels
    return before their dtype switch for empty and one-element results (the runs that
    did not raise)."""
    op, sig = failed
    base, known = _shape_class(sig)
    if known == "scalar" and _is_factory(op):
        return op, base
    return op, sig


def _is_factory(op: str) -> bool:
    """Whether an aten overload (``aten::linspace.Tensor_Tensor``) is a factory
    (:func:`torchplace.sim.rules._cuda_ops.is_factory`), in the torch that runs this."""
    import torch

    from torchplace.sim.rules._cuda_ops import is_factory

    name, _, overload = op.removeprefix("aten::").partition(".")
    packet = getattr(torch.ops.aten, name, None)
    func = getattr(packet, overload or "default", None) if packet is not None else None
    return func is not None and is_factory(func)


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _observe(
    seen: dict[tuple[str, str], _Observed],
    ran_in: dict[str, set[tuple[str, int]]],
    case: tuple[str, int],
    cpu: dict[str, Any],
    cuda: dict[str, Any],
    supported: bool,
) -> None:
    for op, sig in _classed(cuda):
        seen[(op, sig)].cuda_ran += 1
        ran_in[op].add(case)
    for op, sig in _classed(cpu):
        seen[(op, sig)].cpu_ran += 1
    if cpu["failed"] is not None and cpu["result"] != "ok":
        seen[_failed_class(cpu["failed"])].cpu_failed += 1
    if cuda["failed"] is None or cuda["result"] == "ok":
        return  # (an error raised and caught inside the operator)
    if cuda["result"] == "values":
        return  # raised after reading values no kernel computed: no evidence
    o = seen[_failed_class(cuda["failed"])]
    if cuda["result"] == "device":  # passed the host code's checks
        if supported:
            o.cuda_ran += 1
            ran_in[cuda["failed"][0]].add(case)
        else:
            o.library += 1
        return
    o.cuda_failed[(cuda["result"][0], cuda["result"][1])] += 1
    o.failed_in.add(case)


def _first_line(text: str) -> str:
    """An error's first line with the device index left out (``cuda:1`` -> ``cuda``)."""
    return re.sub(r"cuda:\d+", "cuda", text.split("\n", 1)[0])[:500]


def _above_dispatch(
    paths: dict[str, dict[str, Any]], cpu: dict[str, Any], cuda: dict[str, Any], dtype: str
) -> None:
    """Where torch's code above the dispatcher (a composite's C++, a Python function) takes
    another path on CUDA than on the CPU, or checks the device: the torch function the user
    called, the sample's dtype, and CUDA's error there (none where CUDA runs what the CPU
    refuses)."""
    cuda_error = isinstance(cuda["result"], list)
    cpu_error = isinstance(cpu["result"], list)
    if cuda_error and (not cpu_error or cpu["result"][1] != cuda["result"][1]):
        above = cuda["failed"] is None
        elsewhere = cuda["failed"] is not None and not any(
            k[0] == cuda["failed"][0]
            for k in [*cpu["ran"], *([cpu["failed"]] if cpu["failed"] else [])]
        )  # CUDA refused an operator the CPU's path never reached
        if (above or elsewhere) and cuda.get("raised_in"):
            paths[cuda["raised_in"]]["texts"].add(_first_line(cuda["result"][1]))
            paths[cuda["raised_in"]]["dtypes"].add(dtype)
    elif cpu_error and not cuda_error and cpu["failed"] is None and cpu.get("raised_in"):
        paths[cpu["raised_in"]]["dtypes"].add(dtype)  # the CPU refuses above dispatch; CUDA runs


def _refused_everywhere(paths: dict[str, dict[str, Any]], dtype: str, samples: list[Any]) -> None:
    """An operator CUDA refuses in this dtype on every sample with one text, raised in a
    torch function whose path differs on CUDA (cuDNN's batch norm, which the CPU build's
    composite never picks: it asks whether torch was built with cuDNN): a refusal of that
    function in that dtype."""
    results = [s["cuda"] for s in samples]
    if not results or not all(isinstance(r["result"], list) for r in results):
        return
    if len({(r["result"][0], r["result"][1], r.get("raised_in")) for r in results}) != 1:
        return
    key = results[0].get("raised_in")
    text = _first_line(results[0]["result"][1])
    if key in paths and text in paths[key]["texts"]:
        paths[key]["refuse"][dtype] = [results[0]["result"][0], results[0]["result"][1]]


def _shape_class(sig: str) -> tuple[str, str]:
    """``"float32|empty"`` -> ``("float32", "empty")``; ``"float32"`` -> ``("float32", "")``."""
    for shape in ("empty", "filled", "scalar"):
        if sig.endswith("|" + shape):
            return sig[: -len(shape) - 1], shape
    return sig, ""


def _could_not_run_template(seen: dict[tuple[str, str], _Observed]) -> str | None:
    for o in seen.values():
        for _kind, text in o.cuda_failed:
            if text.startswith("Could not run '") and "from the 'CUDA' backend" in text:
                name = text.split("'", 2)[1]
                head = text.partition("\n\n")[0]
                start = head.index("is only available for these backends: [")
                head = (
                    head[:start].replace(name, "{name}")
                    + "is only available for these backends: [{keys}]."
                )
                return head + "\n\n{table}"
    return None


def _result(result: Any) -> Any:
    """A case's outcome for the sweep: "ok", "device" or [type, first line of the text]."""
    if isinstance(result, list):
        return [result[0], result[1].split("\n", 1)[0][:500]]
    return result


def _outcome(cuda: dict[str, Any], supported: bool) -> Any:
    """A sample's outcome on CUDA for the sweep: ``ok`` (with the outputs' shapes, dtypes
    and devices when they do not depend on values), ``device`` (the host code handed the
    work to a library or kernel: it ran as far as it can without a GPU), ``unknown`` (the
    same, for a dtype OpInfo says CUDA lacks: the library may refuse it) or the error."""
    result = _result(cuda["result"])
    if (result == "device" and not supported) or result == "values":
        result = "unknown"
    return {"result": result, "out": cuda.get("out")} if result == "ok" else {"result": result}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--python", default=sys.executable, help="a CUDA build's interpreter")
    parser.add_argument(
        "--raw", type=Path, help="keep (or reuse, with --reuse) the raw records here"
    )
    parser.add_argument("--reuse", action="store_true", help="write the tables from --raw only")
    parser.add_argument("--worker", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return 0
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="host-only-cuda-") as tmp:
        raw = args.raw or Path(tmp) / "raw.jsonl"
        if not args.reuse:
            env = build_runtime(args.python, Path(tmp))
            collect(args.python, env, raw)
        runtime, sweep = tables(raw)
    version = ".".join(runtime["torch"].split(".")[:2])
    out = ROOT / "src" / "torchplace" / "data" / f"cuda-ops-{version}.json.gz"
    truth = ROOT / "benchmarks" / "data" / f"opinfo-cuda-{version}.json.gz"
    truth.parent.mkdir(exist_ok=True)
    for path, data in ((out, runtime), (truth, sweep)):
        body = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        path.write_bytes(gzip.compress(body, mtime=0))
        print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size / 1024:.0f} KiB)")
    refused = sum(len(v) for v in runtime["refuse"].values())
    print(
        f"torch {runtime['torch']}: {refused} refused signatures over {len(runtime['refuse'])} "
        f"operators, {len(runtime['no_kernel'])} operators without a CUDA kernel, "
        f"{sum(len(v) for v in runtime['widen'].values())} signatures widened on the CPU, "
        f"{len(sweep['crashes'])} crashes, in {time.monotonic() - began:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
