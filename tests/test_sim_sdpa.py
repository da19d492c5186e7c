"""The attention kernel CUDA picks, ported from sdp_utils.cpp (torchplace.sim.rules._sdpa).

Neighbouring cases across GPU generations, dtypes, head dims, masks, dropout, gradients,
grouped-query attention, strides and alignment; the warnings and errors of a forced backend
that cannot run; and, on the CUDA build, PyTorch's own ``can_use_flash_attention`` /
``can_use_efficient_attention`` as the oracle for the checks they can make without a driver.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torchplace.sim import simulate
from torchplace.sim.rules import _sdpa

A100, A10, L4, T4, V100, P100 = (8, 0), (8, 6), (8, 9), (7, 5), (7, 0), (6, 0)
H100, B200, RTX5090 = (9, 0), (10, 0), (12, 0)
F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


def _t(shape: tuple[int, ...], dtype: torch.dtype = F16, grad: bool = False) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="meta", requires_grad=grad)


def _params(
    dtype: torch.dtype = F16,
    head_dim: int = 64,
    *,
    s_q: int = 128,
    s_k: int = 128,
    heads: tuple[int, int] = (8, 8),
    grad: bool = False,
    mask: torch.Tensor | None = None,
    dropout: float = 0.0,
    causal: bool = False,
    gqa: bool = False,
) -> _sdpa.Params:
    q = _t((2, heads[0], s_q, head_dim), dtype, grad)
    k = _t((2, heads[1], s_k, head_dim), dtype, grad)
    v = _t((2, heads[1], s_k, head_dim), dtype, grad)
    return _sdpa.Params(q, k, v, mask, dropout, causal, gqa)


@contextmanager
def _fresh_priority() -> Iterator[None]:
    with _sdpa.installed():
        yield


def _pick(p: _sdpa.Params, sm: tuple[int, int], cudnn: int = 92400) -> str:
    with _fresh_priority():
        return _sdpa.select(p, _sdpa.Gpu(*sm, cudnn))


@pytest.mark.parametrize(
    ("sm", "dtype", "head_dim", "kernel"),
    [
        (A100, F16, 64, "flash"),
        (A100, BF16, 64, "flash"),
        (A100, F32, 64, "memory-efficient"),
        (A100, F16, 60, "flash"),  # padded to 64 (attention.cpp pad_last_dim<8>)
        (A100, F32, 60, "memory-efficient"),  # fp32 needs the head dim divisible by 4
        (A100, F32, 62, "math"),
        (A100, F16, 300, "math"),  # over flash's 256, not divisible by 8
        (A100, F16, 320, "memory-efficient"),
        (T4, F16, 64, "memory-efficient"),  # flash needs sm80
        (T4, BF16, 64, "math"),  # memory-efficient takes half and float below sm80
        (V100, F32, 64, "memory-efficient"),
        (P100, F16, 60, "memory-efficient"),  # no tensor cores: any head dim
        (H100, F16, 64, "cuDNN"),  # first on sm90 with cuDNN > 9.15
        (H100, F32, 64, "memory-efficient"),
        (H100, F16, 60, "flash"),  # cuDNN wants a multiple of 8
        (H100, BF16, 256, "cuDNN"),  # cuDNN > 9.22 takes 256 on sm90
        (B200, F16, 64, "cuDNN"),
        (RTX5090, F16, 64, "flash"),  # cuDNN is not preferred on sm120
    ],
)
def test_kernel_by_gpu_dtype_and_head_dim(
    sm: tuple[int, int], dtype: torch.dtype, head_dim: int, kernel: str
) -> None:
    assert _pick(_params(dtype, head_dim), sm) == kernel


def test_training_constraints_masks_dropout_and_sequence_lengths() -> None:
    # flash can't train head dims in (192, 224] on sm86-89 and sm120
    for sm in (A10, L4, RTX5090):
        assert _pick(_params(head_dim=200, grad=True), sm) == "memory-efficient"
        assert _pick(_params(head_dim=200), sm) == "flash"
    assert _pick(_params(head_dim=200, grad=True), A100) == "flash"
    mask = _t((2, 1, 128, 128), torch.bool)
    assert _pick(_params(mask=mask), A100) == "memory-efficient"  # flash takes no mask
    assert _pick(_params(mask=mask), H100) == "cuDNN"
    assert _pick(_params(mask=_t((2, 1, 128, 128), F16, grad=True)), H100) == "memory-efficient"
    # cuDNN's dropout is in steps of 1/16
    assert _pick(_params(dropout=0.1), H100) == "flash"
    assert _pick(_params(dropout=0.125), H100) == "cuDNN"
    # flash: causal only for square attention
    assert _pick(_params(causal=True, s_q=64), A100) == "memory-efficient"
    # cuDNN's decode guard on sm10x (cuDNN 9.19-9.25.0, not 9.24.1); not on sm90
    assert _pick(_params(s_q=1), B200) == "flash"
    assert _pick(_params(s_q=1), B200, cudnn=92401) == "cuDNN"
    assert _pick(_params(s_q=1), H100) == "cuDNN"
    assert _pick(_params(s_k=0), A100) == "math"


def test_grouped_and_multi_query_attention() -> None:
    assert _pick(_params(heads=(8, 2), gqa=True), H100) == "cuDNN"
    assert _pick(_params(heads=(8, 2), gqa=True), A100) == "flash"
    assert _pick(_params(F32, heads=(8, 2), gqa=True), A100) == "memory-efficient"
    assert _pick(_params(heads=(8, 2)), A100) == "math"  # different heads without enable_gqa
    assert _pick(_params(heads=(8, 1)), A100) == "flash"  # one key/value head: MQA
    assert _pick(_params(heads=(8, 3), gqa=True), A100) == "math"  # 3 does not divide 8


def test_strides_alignment_and_settings() -> None:
    q = torch.empty(2, 8, 128, 128, dtype=F16, device="meta")[..., ::2]  # stride 2
    p = _sdpa.Params(q, q, q, None, 0.0, False, False)
    assert _pick(p, A100) == "math"
    base = torch.empty(2 * 8 * 128 * 64 + 1, dtype=F32, device="meta")
    shifted = base[1:].view(2, 8, 128, 64)  # 4 bytes past a 16-byte boundary
    p = _sdpa.Params(shifted, shifted, shifted, None, 0.0, False, False)
    assert _pick(p, A100) == "math"
    assert _pick(p, T4) == "memory-efficient"  # the alignment check is sm80's
    torch.use_deterministic_algorithms(True)
    try:
        assert _pick(_params(), H100) == "flash"  # cuDNN SDPA is not deterministic
    finally:
        torch.use_deterministic_algorithms(False)
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
        assert _pick(_params(), A100) == "flash"
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION], set_priority=True):
        assert _pick(_params(), A100) == "cuDNN"


def test_cudnn_can_be_deprioritized(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", "1")
    assert _pick(_params(), H100) == "flash"


def _run_forced(gpu: str, dtype: torch.dtype, backends: list[SDPBackend]) -> list[str]:
    with simulate(gpu), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        q = torch.randn(2, 4, 16, 64, device="cuda", dtype=dtype)
        with sdpa_kernel(backends), pytest.raises(RuntimeError) as error:
            F.scaled_dot_product_attention(q, q, q)
    assert str(error.value) == "No available kernel. Aborting execution."
    assert all(w.filename == __file__ for w in caught)
    return [str(w.message) for w in caught]


def test_a_forced_backend_that_cannot_run_warns_and_raises_as_cuda() -> None:
    assert _run_forced("A100 40GB", F32, [SDPBackend.FLASH_ATTENTION]) == [
        "Memory efficient kernel not used because:",
        "Memory Efficient attention has been runtime disabled.",
        "Flash attention kernel not used because:",
        "Expected query, key and value to all be of dtype: {Half, BFloat16}. Got Query dtype: "
        "Float, Key dtype: Float, and Value dtype: Float instead.",
        "cuDNN attention kernel not used because:",
        "cuDNN attention has been runtime disabled.",
    ]
    messages = _run_forced("T4", F16, [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION])
    assert messages[3] == (
        "Flash attention only supports gpu architectures in the range [sm80, sm121]. "
        "Attempting to run on a sm 7.5 gpu."
    )
    assert messages[5] == (
        "cuDNN MHA only supports gpu architectures in the range [sm80, sm121]. Attempting "
        "to run on a sm 7.5 gpu."
    )


def test_the_same_call_runs_where_a_kernel_can() -> None:
    with simulate("A100 40GB") as report:
        q = torch.randn(2, 4, 16, 64, device="cuda", dtype=F16)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = F.scaled_dot_product_attention(q, q, q)
    assert out.dtype == F16 and out.shape == q.shape
    assert any("flash kernel (as on the GPU)" in n["text"] for n in report.notes)


def test_no_backend_at_all_and_the_overrideable_slot() -> None:
    flags = ("flash", "mem_efficient", "math", "cudnn")
    with simulate("A100 40GB"):
        q = torch.randn(2, 4, 16, 62, device="cuda")
        saved = [getattr(torch.backends.cuda, f"{f}_sdp_enabled")() for f in flags]
        try:
            torch.backends.cuda.enable_math_sdp(False)
            # math off, nothing else fits: the priority order reaches the overrideable
            # backend, still enabled: select_sdp_backend's TORCH_CHECK
            with pytest.raises(RuntimeError, match=r"^Invalid backend$"):
                F.scaled_dot_product_attention(q, q, q)
            for f in flags:
                getattr(torch.backends.cuda, f"enable_{f}_sdp")(False)
            with pytest.raises(RuntimeError, match="No viable backend for scaled_dot_product"):
                F.scaled_dot_product_attention(q, q, q)
        finally:
            for f, on in zip(flags, saved, strict=True):
                getattr(torch.backends.cuda, f"enable_{f}_sdp")(on)


def test_input_errors_name_the_simulated_devices() -> None:
    with simulate("A100 40GB"):
        q = torch.randn(2, 4, 16, 64, device="cuda", dtype=F16)
        with pytest.raises(RuntimeError, match=r"query.dtype: c10::Half key.dtype: float and"):
            F.scaled_dot_product_attention(q, q.float(), q.float())
        with pytest.raises(RuntimeError, match=r"query.device: cuda:0 key.device: cpu and"):
            F.scaled_dot_product_attention(q, q.cpu(), q)


def _saved_bytes(gpu: str, dtype: torch.dtype) -> int:
    with simulate(gpu):
        q = torch.randn(4, 8, 256, 64, device="cuda", dtype=dtype, requires_grad=True)
        before = torch.cuda.memory_allocated()
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        held = torch.cuda.memory_allocated() - before
        del out
    return held


def test_the_kernel_decides_what_is_kept_for_backward() -> None:
    # T4: bfloat16 runs the math kernel, which keeps the attention matrix (4*8*256*256
    # elements); float16 the memory-efficient kernel, which keeps its log-sum-exp
    matrix = 4 * 8 * 256 * 256 * 2
    assert _saved_bytes("T4", BF16) - _saved_bytes("T4", F16) > matrix
    assert _saved_bytes("H100", F16) < matrix // 2  # cuDNN: the output and log-sum-exp


_ORACLE = """
import json, sys, torch
from torch.backends.cuda import SDPAParams, can_use_flash_attention, can_use_efficient_attention

class Cuda(torch.Tensor):
    @staticmethod
    def __new__(cls, shape, dtype, strides, grad):
        return torch.Tensor._make_wrapper_subclass(
            cls, shape, strides=strides, dtype=dtype, device="cuda", requires_grad=grad)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError(f"the checks ran an operator: {func}")

for case in json.loads(sys.argv[1]):
    q, k, v, mask = (None if t is None else Cuda(t[0], getattr(torch, t[1]), t[2], t[3])
                     for t in case["tensors"])
    torch.backends.cuda.enable_flash_sdp(case["flash"])
    p = SDPAParams(q, k, v, mask, case["dropout"], case["causal"], case["gqa"])
    print("CASE", flush=True)
    sys.stderr.write("CASE\\n"); sys.stderr.flush()
    can_use_flash_attention(p, True)
    can_use_efficient_attention(p, True)
    sys.stderr.flush()
"""


def _oracle_cases() -> list[dict[str, Any]]:
    cases = []
    for shape in [(2, 8, 64, 64), (8, 64, 64), (2, 8, 64, 300), (2, 8, 64, 256)]:
        for key_dim in (shape[-1], 32):
            for mask in (False, True):
                for flash in (True, False):
                    for dtype in ("float16", "float32"):
                        k = (*shape[:-1], key_dim)
                        strides = [list(torch.empty(s, device="meta").stride()) for s in (shape, k)]
                        tensors = [
                            [list(shape), dtype, strides[0], False],
                            [list(k), dtype, strides[1], False],
                            [list(k), dtype, strides[1], False],
                            [[shape[-2], shape[-2]], "bool", [shape[-2], 1], False]
                            if mask
                            else None,
                        ]
                        cases.append({
                            "tensors": tensors, "flash": flash, "dropout": 0.0,
                            "causal": False, "gqa": False,
                        })  # fmt: skip
    return cases


def _ported(case: dict[str, Any]) -> tuple[str, str]:
    """The first messages of flash's and memory-efficient's checks up to the hardware check
    (which, without a driver, is where PyTorch's own checks stop)."""
    q, k, v, mask = (
        None if t is None else torch.empty_strided(t[0], t[2], dtype=getattr(torch, t[1]))
        for t in case["tensors"]
    )
    p = _sdpa.Params(q, k, v, mask, case["dropout"], case["causal"], case["gqa"])
    gpu = _sdpa.Gpu(9, 0, 92400)
    saved = torch._C._get_flash_sdp_enabled()
    torch.backends.cuda.enable_flash_sdp(case["flash"])
    try:
        results = []
        for checks, hardware in (
            (_sdpa._FLASH[:4], "flash attention requires a CUDA device, which is not available."),
            (
                _sdpa._EFFICIENT[:1],
                "Mem Efficient attention requires a CUDA device, which is not available.",
            ),
        ):
            debug: list[str] = []
            _sdpa._run(checks, p, gpu, debug)
            results.append(debug[0] if debug else hardware)
        return results[0], results[1]
    finally:
        torch.backends.cuda.enable_flash_sdp(saved)


@pytest.mark.skipif(
    not torch.backends.cuda.is_flash_attention_available(),
    reason="PyTorch's own checks are compiled only into its CUDA build",
)
def test_pytorchs_own_checks_agree_where_they_run_without_a_driver() -> None:
    cases = _oracle_cases()
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_ORACLE), json.dumps(cases)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    # the C++ warnings, one CASE block per case: "[W... sdp_utils.cpp:N] Warning: MSG (function F)"
    blocks = run.stderr.split("CASE\n")[1:]
    assert len(blocks) == len(cases)
    agree = 0
    for case, block in zip(cases, blocks, strict=True):
        messages = [
            line.split("Warning: ", 1)[1].rsplit(" (function ", 1)[0]
            for line in block.splitlines()
            if "Warning: " in line
        ]
        assert tuple(messages[:2]) == _ported(case), case
        agree += 1
    assert agree == len(cases) == 64
