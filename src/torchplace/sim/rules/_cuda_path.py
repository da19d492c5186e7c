"""torch functions whose code above the dispatcher takes another path on CUDA, run as CUDA
would first.

Some of torch's code runs above the dispatcher, where the simulator's dispatch mode does not
see it, and looks at the device itself: a composite operator's C++ (``meshgrid`` checks that
its tensors share a device, ``tensor_split`` that its index tensor is on the CPU, the FFTs
accept half precision only on CUDA, ``batch_norm`` picks cuDNN on CUDA and its own kernel on
the CPU). On a simulated GPU that code sees the backing device (the CPU), so it checks
nothing, refuses what CUDA runs, or takes the CPU's path. ``tools/gen_cuda_ops.py`` finds
these functions (where the same sample's outcome differs between the CUDA and the CPU build
and the difference arises above the dispatcher or in an operator only one path reaches) and
records CUDA's errors there (``paths`` in the table).

For those functions only, :func:`cuda_path` runs the call first on fake tensors on the
simulated CUDA devices (``FakeTensorMode``: shapes and dtypes, no data), with CUDA's
refusals (:mod:`torchplace.sim.rules._cuda_ops`) checked at every aten operator that path
reaches: it raises CUDA's error where CUDA raises one, and otherwise returns the outputs'
fake tensors, whose dtypes :func:`wider` gives a call the CPU then refuses (bf16 FFTs), the
call made in a wider dtype. An error the fake run raises that is not one of CUDA's recorded
errors (a fake tensor's own limit: data-dependent shapes) is ignored: the call runs as
before.

``FakeTensor`` constructed directly is private torch API: it is used here only.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map

from torchplace.cost import call_tensors
from torchplace.sim.rules import _backends
from torchplace.sim.rules._cuda_ops import CudaPath, function_key, paths, rule_for

__all__ = ["PATH_CACHE", "applies", "cuda_path", "path_of", "wider"]


class _Refused(Exception):
    """CUDA's error for an operator on CUDA's path (carried out of the fake run)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _CudaTable(TorchDispatchMode):
    """CUDA's refusals at every aten operator the fake run reaches."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        rule = rule_for(func)
        if rule is not None:
            tensors = call_tensors(args, kwargs)
            # a composite's native_batch_norm: on CUDA, _batch_norm_impl_index picks cuDNN
            # or the native kernel first (a build without cuDNN always picks the latter)
            picked = _backends.refusal(func, rule, tensors, args, kwargs, composite=True)
            refused = picked or rule.refusal(tensors, args, kwargs, func)
            if refused is not None:
                raise _Refused(refused)
        return func(*args, **kwargs)


#: torch function -> how its path differs on CUDA (None: it does not); read by the
#: function mode before it calls :func:`path_of`
PATH_CACHE: dict[Any, CudaPath | None] = {}


def path_of(func: Callable[..., Any]) -> CudaPath | None:
    """How a torch function's path differs on CUDA (None: it does not)."""
    found = paths().get(function_key(func))
    with contextlib.suppress(TypeError):  # not hashable
        PATH_CACHE[func] = found
    return found


def applies(
    path: CudaPath, args: Any, kwargs: Any, label: Callable[[torch.Tensor], int | None]
) -> bool:
    """Whether this call is one whose path differs: its first tensor has a dtype the samples
    differed for, or (where mixing devices made them differ) its tensors are on several."""
    tensors = call_tensors(args, kwargs)
    if tensors and tensors[0].dtype in path.dtypes:
        return True
    return path.mixing and len({label(t) for t in tensors}) > 1


def _first_line(text: str) -> str:
    return re.sub(r"cuda:\d+", "cuda", text.split("\n", 1)[0])[:500]


def cuda_path(
    func: Callable[..., Any],
    args: Any,
    kwargs: Any,
    label: Callable[[torch.Tensor], int | None],
    path: CudaPath,
) -> Any:
    """Run ``func`` as CUDA would, on fake tensors: raise CUDA's error, or return the fake
    outputs (None where the fake run cannot tell)."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    if path.refuse:
        tensors = call_tensors(args, kwargs)
        found = path.refuse.get(tensors[0].dtype) if tensors else None
        if found is not None:
            raise found[0](found[1])

    log = logging.getLogger("torch._subclasses.fake_tensor")  # logs each meta failure
    quiet, log.disabled = log.disabled, True
    with _disable_current_modes():
        mode = FakeTensorMode(allow_non_fake_inputs=True)

        def fake(a: Any) -> Any:
            if not isinstance(a, torch.Tensor):
                return a
            index = label(a)
            if index is None:
                return a  # a host tensor: real, with its values
            meta = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
            return FakeTensor(mode, meta, torch.device("cuda", index))

        try:
            fake_args, fake_kwargs = tree_map(fake, (args, kwargs))
            with mode, _CudaTable():
                return func(*fake_args, **fake_kwargs)
        except _Refused as e:
            raise e.error from None
        except Exception as e:
            if _first_line(str(e)) in path.texts:
                raise
            return None
        finally:
            log.disabled = quiet


def wider(func: Callable[..., Any], args: Any, kwargs: Any, fake_out: Any, error: Exception) -> Any:
    """``func`` called in a wider dtype (fp16/bf16 -> fp32, complex32 -> complex64), its
    outputs cast to the dtypes CUDA's path gives them (``fake_out``); ``error`` (the CPU's)
    where that fails too."""
    plan = {
        torch.float16: torch.float32,
        torch.bfloat16: torch.float32,
        torch.complex32: torch.complex64,
    }

    def cast(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and a.dtype in plan:
            return a.to(plan[a.dtype])
        return a

    try:
        out = func(*tree_map(cast, args), **tree_map(cast, kwargs))
    except (RuntimeError, NotImplementedError):
        raise error from None
    wants = [t for t in tree_flatten(fake_out)[0] if isinstance(t, torch.Tensor)]
    got = iter(wants)

    def narrow(t: Any) -> Any:
        want = next(got, None)
        if isinstance(t, torch.Tensor) and want is not None and t.dtype != want.dtype:
            return t.to(want.dtype)
        return t

    return tree_map(narrow, out)
