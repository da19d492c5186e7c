"""torch's own CUDA Python modules, re-run over the emulated bindings for a simulation.

``torch/cuda/streams.py``, ``graphs.py`` and ``memory.py`` decide at import what their
classes derive from: ``class Stream(torch._C._CudaStreamBase)``, ``class
CUDAGraph(torch._C._CUDAGraph)``, ``class MemPool(torch._C._MemPool)``. On a CPU build those
bases are ``_dummy_type`` placeholders ("Tried to instantiate dummy base class"); on a CUDA
build they are C++ classes that need a driver. So after the emulated bindings are in
``torch._C``, each module's own source is executed again in its own namespace — the classes
and names it defines are then torch's code over the emulated bases, as ``import`` would
have made them on a machine with GPUs — and every reference to a replaced class elsewhere
(``torch.cuda.Stream``, ``torch.cuda.CUDAGraph``, names other modules imported) is pointed
at its new version. When the simulation ends, each namespace gets back what it held.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["reloaded"]

_CODE: dict[str, types.CodeType] = {}  # file -> compiled module source (compiled once)
_MISSING = object()


def _code(module: types.ModuleType) -> types.CodeType:
    path = module.__file__
    assert path is not None  # torch's modules are files
    code = _CODE.get(path)
    if code is None:
        with open(path, encoding="utf-8") as f:
            code = _CODE[path] = compile(f.read(), path, "exec")
    return code


@contextlib.contextmanager
def reloaded(names: tuple[str, ...]) -> Iterator[None]:
    """Re-execute the named (already imported) modules' source for the block."""
    modules = [sys.modules[name] for name in names if name in sys.modules]
    saved = [dict(vars(m)) for m in modules]
    rebound: list[tuple[dict[str, Any], str, Any]] = []
    try:
        for module in modules:
            exec(_code(module), vars(module))
        replaced: dict[int, Any] = {}
        for module, before in zip(modules, saved, strict=True):
            now = vars(module)
            for key, old in before.items():
                new = now.get(key, _MISSING)
                if isinstance(old, type) and isinstance(new, type) and new is not old:
                    replaced[id(old)] = new
        for module in list(sys.modules.values()):
            space = getattr(module, "__dict__", None)
            if not isinstance(space, dict) or any(space is vars(m) for m in modules):
                continue
            for key, value in list(space.items()):
                if id(value) in replaced:  # (an id: no attribute of the value is read)
                    rebound.append((space, key, value))
                    space[key] = replaced[id(value)]
        yield
    finally:
        for space, key, value in reversed(rebound):
            space[key] = value
        for module, before in zip(modules, saved, strict=True):
            _restore(vars(module), before)


def _restore(space: dict[str, Any], before: dict[str, Any]) -> None:
    """Give a namespace back what it held; submodules imported meanwhile stay."""
    for key in [k for k in space if k not in before]:
        if not isinstance(space[key], types.ModuleType):
            del space[key]
    space.update(before)
