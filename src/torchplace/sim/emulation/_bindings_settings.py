"""The CUDA libraries' settings torch's Python reads and sets through ``torch._C``, emulated.

cuBLAS and cuBLASLt workspace sizes (``torch.backends.cuda.cublas_workspace_size``), the
cuDNN benchmark settings (``torch.backends.cudnn.benchmark_limit``), green contexts and
TunableOp (``torch.cuda.tunable``). The values and their defaults are ATen's; what a
simulated GPU cannot do is refused with a plain "not simulated" error.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from torchplace.sim.accounting._state import SimState

__all__ = ["settings_bindings"]


def _not_simulated(what: str, why: str) -> RuntimeError:
    return RuntimeError(f"not simulated: {what}: {why}")


def _cublaslt_default() -> int:
    """``parseCUDABlasLtWorkspaceSize`` (aten/src/ATen/cuda/CublasHandlePool.cpp):
    ``CUBLASLT_WORKSPACE_SIZE`` KiB, 1024 KiB when unset or not a number."""
    kib = 1024
    value = os.environ.get("CUBLASLT_WORKSPACE_SIZE")
    if value is not None:
        try:
            kib = int(value)
        except ValueError:
            warnings.warn(
                f"invalid CUBLASLT_WORKSPACE_SIZE, using default workspace size of {kib} KiB.",
                stacklevel=3,
            )
    return kib * 1024


class _Settings:
    """The settings' current values: ATen's defaults until a script sets them."""

    def __init__(self, state: SimState) -> None:
        self.state = state
        self.cublaslt_override: int | None = None
        # aten/src/ATen/Context.h: benchmark_limit_cudnn = 10, conv benchmark empty cache on
        self.cudnn_benchmark_limit = 10
        self.conv_benchmark_empty_cache = True
        self.allocator_settings = ""
        conf = os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))
        if conf:
            self.set_allocator(conf, from_environment=True)

    def set_allocator(self, text: str, *, from_environment: bool = False) -> None:
        """``torch._C._accelerator_setAllocatorSettings``: c10 parses the whole string
        again (what it does not name goes back to its default) and the caching
        allocator of every device takes the settings the model has."""
        parsed = parse_allocator_settings(text)
        unmodelled = [
            f"{key}:{parsed[key]}"
            for key in ("expandable_segments", "backend")
            if parsed.get(key) not in (None, False, "native")
        ]
        if unmodelled and not from_environment:
            raise _not_simulated(
                ", ".join(unmodelled),
                "the simulated allocator is the native caching allocator with ordinary segments",
            )
        for item in unmodelled:  # from PYTORCH_ALLOC_CONF: simulated without, and said so
            self.state.notes[
                f"PYTORCH_ALLOC_CONF {item} is not simulated: the native caching allocator "
                "with ordinary segments stands in for it"
            ] += 1
        self.allocator_settings = text
        for dev in self.state.devices:
            dev.allocator.configure(
                max_split_size=parsed.get("max_split_size_mb"),
                max_non_split_rounding=parsed.get("max_non_split_rounding_mb", 20 * _MB),
                roundup_power2_divisions=parsed.get("roundup_power2_divisions"),
            )
            fraction = parsed.get("per_process_memory_fraction")
            if fraction is not None:
                dev.allocator.set_memory_fraction(fraction)

    def set_cublas(self, size: int) -> None:
        if size < 0:  # the binding takes a size_t (the docs: "Must be non-negative")
            raise TypeError(f"the cuBLAS workspace size must be non-negative, got {size}")
        self.state.cublas_workspace_override = int(size)

    def cublas(self) -> int:
        from torchplace.sim.accounting._state import cublas_workspace_bytes

        state = self.state
        spec = state.devices[state.current].spec
        return cublas_workspace_bytes(spec, state.cublas_workspace_override)

    def set_cublaslt(self, size: int) -> None:
        if size < 0:
            raise TypeError(f"the cuBLASLt workspace size must be non-negative, got {size}")
        self.cublaslt_override = int(size)

    def cublaslt(self) -> int:
        return _cublaslt_default() if self.cublaslt_override is None else self.cublaslt_override


# --------------------------------------------------------------- allocator settings

_MB = 1024 * 1024
_BOOL_KEYS = (
    "expandable_segments",
    "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register",
    "pinned_use_background_threads",
    "graph_capture_record_stream_reuse",
)
_NUMBER_KEYS = ("per_process_memory_fraction", "pinned_reserve_segment_size_mb")


def parse_allocator_settings(text: str) -> dict[str, Any]:
    """``PYTORCH_ALLOC_CONF`` as c10/core/AllocatorConfig.cpp parses it (``key:value``
    pairs, ``roundup_power2_divisions`` also as ``[MB:n,...,>:n]``), with its errors
    (ValueError, the messages of torch 2.14's parser)."""
    tokens: list[str] = []
    word = ""
    for ch in text:
        if ch in ",:[]":
            if word:
                tokens.append(word)
                word = ""
            tokens.append(ch)
        elif ch != " ":
            word += ch
    if word:
        tokens.append(word)
    out: dict[str, Any] = {}
    i = 0

    def value(at: int) -> str:
        if at + 1 >= len(tokens) or tokens[at] != ":":
            raise ValueError("Index out of bounds in ConfigTokenizer")
        return tokens[at + 1]

    def number(text: str, kind: type = int) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise ValueError("stoull" if kind is int else "stod") from None

    while i < len(tokens):
        key = tokens[i]
        if key in ("max_split_size_mb", "max_non_split_rounding_mb"):
            mb = number(value(i + 1))
            if mb < 20:  # kLargeBuffer / kMB
                raise ValueError(f"CachingAllocator option {key} too small, must be >= 20")
            out[key] = mb * _MB
            i += 3
        elif key == "garbage_collection_threshold":
            threshold = number(value(i + 1), float)
            if not 0 < threshold < 1:
                raise ValueError("garbage_collect_threshold is invalid, set it in (0.0, 1.0)")
            out[key] = threshold
            i += 3
        elif key == "roundup_power2_divisions":
            i, out[key] = _parse_divisions(tokens, i + 1, number)
        elif key in _BOOL_KEYS or key == "release_lock_on_hipmalloc":
            flag = value(i + 1)
            if flag not in ("True", "False"):
                raise ValueError(
                    f"Expected 'True' or 'False' at index {i + 2} in ConfigTokenizer but got "
                    f"'{flag}'"
                )
            out[key] = flag == "True"
            i += 3
        elif key == "pinned_num_register_threads":
            n = number(value(i + 1))
            if n & (n - 1) or n == 0:
                raise ValueError(f"Number of register threads has to be power of 2, got {n}")
            if n > 128:
                raise ValueError(
                    f"Number of register threads should be less than or equal to 128, got {n}"
                )
            out[key] = n
            i += 3
        elif key == "backend":
            out[key] = value(i + 1)
            i += 3
        elif key in _NUMBER_KEYS:
            out[key] = number(value(i + 1), float)
            i += 3
        else:
            raise ValueError(f"Unrecognized key '{key}' in Accelerator allocator config.")
        if i < len(tokens) and tokens[i] == ",":
            i += 1
    return out


def _parse_divisions(tokens: list[str], i: int, number: Any) -> tuple[int, list[int]]:
    """``roundup_power2_divisions``' value: one count, or ``[MB:count,...,>:count]``."""
    divisions = [0] * 16  # kRoundUpPowerOfTwoIntervals, from 1 MiB to 64 GiB
    if i + 1 >= len(tokens) or tokens[i] != ":":
        raise ValueError("Index out of bounds in ConfigTokenizer")
    i += 1
    if tokens[i] != "[":
        n = number(tokens[i])
        if n & (n - 1):
            raise ValueError("For roundups, the divisions has to be power of 2 ")
        return i + 1, [n] * 16
    first, last = True, 0
    i += 1
    while i < len(tokens) and tokens[i] != "]":
        interval = tokens[i]
        if i + 2 >= len(tokens) or tokens[i + 1] != ":":
            raise ValueError("Index out of bounds in ConfigTokenizer")
        n = number(tokens[i + 2])
        if n & (n - 1):
            raise ValueError("For roundups, the divisions has to be power of 2 ")
        if interval == ">":
            divisions[last:] = [n] * (16 - last)
        else:
            mb = number(interval)
            if mb <= 0 or mb & (mb - 1):
                raise ValueError("For roundups, the intervals have to be power of 2 ")
            index = min(mb.bit_length() - 1, 15)
            if first:
                divisions[:index] = [n] * index
                first = False
            divisions[index] = n
            last = index
        i += 3
        if i < len(tokens) and tokens[i] == ",":
            i += 1
    return i + 1, divisions


def _tunable(enabled: Any = True) -> None:
    if bool(enabled):
        raise _not_simulated(
            "TunableOp (torch.cuda.tunable)",
            "it times candidate GEMM kernels on the GPU and keeps the fastest; a simulated "
            "GPU has no kernels to time",
        )


def _green_context(*args: Any, **kwargs: Any) -> Any:
    raise _not_simulated(
        "green contexts (torch.cuda.green_contexts)",
        "they partition a GPU's streaming multiprocessors between streams, which the cost "
        "model does not divide",
    )


def settings_bindings(state: SimState) -> dict[str, Any]:
    """The emulated ``torch._C`` attributes for the CUDA libraries' settings."""
    s = _Settings(state)

    class _CUDAGreenContext:
        """torch._C._CUDAGreenContext: refused (see _green_context)."""

        create = staticmethod(_green_context)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            _green_context()

    _CUDAGreenContext.__module__ = "torch._C"

    return {
        "_accelerator_setAllocatorSettings": s.set_allocator,
        "_accelerator_getAllocatorSettings": lambda: s.allocator_settings,
        "_cuda_getCublasWorkspaceSize": s.cublas,
        "_cuda_setCublasWorkspaceSize": s.set_cublas,
        "_cuda_resetCublasWorkspaceSize": lambda: setattr(state, "cublas_workspace_override", None),
        "_cuda_getCublasLtWorkspaceSize": s.cublaslt,
        "_cuda_setCublasLtWorkspaceSize": s.set_cublaslt,
        "_cuda_resetCublasLtWorkspaceSize": lambda: setattr(s, "cublaslt_override", None),
        "_cuda_get_cudnn_benchmark_limit": lambda: s.cudnn_benchmark_limit,
        "_cuda_set_cudnn_benchmark_limit": lambda n: setattr(s, "cudnn_benchmark_limit", int(n)),
        "_cuda_get_conv_benchmark_empty_cache": lambda: s.conv_benchmark_empty_cache,
        "_cudnn_set_conv_benchmark_empty_cache": lambda v: setattr(
            s, "conv_benchmark_empty_cache", bool(v)
        ),
        # TunableOp: off, as ATen starts it without PYTORCH_TUNABLEOP_ENABLED; turning it on
        # (or its tuning, or recording untuned GEMMs) is refused
        "_cuda_tunableop_enable": _tunable,
        "_cuda_tunableop_is_enabled": lambda: False,
        "_cuda_tunableop_tuning_enable": _tunable,
        "_cuda_tunableop_tuning_is_enabled": lambda: False,
        "_cuda_record_untuned_enable": _tunable,
        "_cuda_record_untuned_is_enabled": lambda: False,
        "_CUDAGreenContext": _CUDAGreenContext,
    }
