"""torch's own Python functions that read a tensor's device, run so that they see the GPU.

A torch function written in Python (``torch.unravel_index``, ``torch.functional.*``,
``torch.nn.functional.*``) starts with ``if has_torch_function(...): return
handle_torch_function(...)``, which hands the whole call to the simulation's
``TorchFunctionMode``; torch runs a mode's handler with the mode popped, so the function's
body then sees each tensor's backing device (the CPU), not the simulated GPU. A body that
reads ``x.device`` to make a tensor "on the same device" (``torch.unravel_index`` makes its
divisors with ``device=indices.device``) then makes it on the host, and the next operation
mixes devices where CUDA's would not.

:func:`reads_device` finds such functions; the function mode then runs the body with itself
active (``torch._C._skip_one_hop_torch_function`` skips the check once; before torch 2.13,
:func:`unguarded`'s copy whose ``has_torch_function*`` checks answer False), so its every
torch call (``.device`` included) goes through the mode, as on a GPU machine. Which
functions: those whose code, or the code of the module-level functions and nested functions
it calls, reads ``device``, ``is_cuda``, ``is_cpu`` or ``get_device`` (found in their
bytecode's names). Others run as before: the operations they make are seen below autograd
anyway, and they cost nothing more.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

__all__ = ["reads_device", "unguarded"]

_DEVICE_NAMES = frozenset({"device", "is_cuda", "is_cpu", "get_device"})
_GUARDS = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")


def _never(*args: Any, **kwargs: Any) -> bool:
    return False


def _reads_device(
    code: types.CodeType, globals_: dict[str, Any], depth: int, seen: set[int]
) -> bool:
    if id(code) in seen:
        return False
    seen.add(id(code))
    if _DEVICE_NAMES.intersection(code.co_names):
        return True
    for const in code.co_consts:  # nested functions and lambdas
        if isinstance(const, types.CodeType) and _reads_device(const, globals_, depth, seen):
            return True
    if depth == 0:
        return False
    for name in code.co_names:  # module-level torch functions it calls
        target = globals_.get(name)
        if (
            isinstance(target, types.FunctionType)
            and target.__module__.startswith("torch")
            and _reads_device(target.__code__, target.__globals__, depth - 1, seen)
        ):
            return True
    return False


_reads: dict[Callable[..., Any], bool] = {}


def reads_device(func: Callable[..., Any]) -> bool:
    """Whether ``func`` is a torch Python function (with a torch-function check) whose code
    reads a tensor's device (cached per function)."""
    try:
        return _reads[func]
    except KeyError:
        found = _reads[func] = _check(func)
        return found


def _check(func: Callable[..., Any]) -> bool:
    if not isinstance(func, types.FunctionType) or not func.__module__.startswith("torch"):
        return False
    code = func.__code__
    if not any(g in code.co_names for g in _GUARDS):
        return False  # not a torch function (the mode does not get it whole)
    return _reads_device(code, func.__globals__, 2, set())


@functools.cache
def unguarded(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func``'s copy whose ``has_torch_function*`` checks answer False, for a torch without
    ``torch._C._skip_one_hop_torch_function`` (before 2.13)."""
    if not isinstance(func, types.FunctionType):
        return func
    globals_ = dict(func.__globals__)
    globals_.update(dict.fromkeys(_GUARDS, _never))
    copy = types.FunctionType(
        func.__code__, globals_, func.__name__, func.__defaults__, func.__closure__
    )
    copy.__kwdefaults__ = func.__kwdefaults__
    return functools.update_wrapper(copy, func)
