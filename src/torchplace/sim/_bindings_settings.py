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

from torchplace.sim._state import SimState

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

    def set_cublas(self, size: int) -> None:
        if size < 0:  # the binding takes a size_t (the docs: "Must be non-negative")
            raise TypeError(f"the cuBLAS workspace size must be non-negative, got {size}")
        self.state.cublas_workspace_override = int(size)

    def cublas(self) -> int:
        from torchplace.sim._state import cublas_workspace_bytes

        state = self.state
        spec = state.devices[state.current].spec
        return cublas_workspace_bytes(spec, state.cublas_workspace_override)

    def set_cublaslt(self, size: int) -> None:
        if size < 0:
            raise TypeError(f"the cuBLASLt workspace size must be non-negative, got {size}")
        self.cublaslt_override = int(size)

    def cublaslt(self) -> int:
        return _cublaslt_default() if self.cublaslt_override is None else self.cublaslt_override


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
