"""Legacy tensor types (``torch.cuda.FloatTensor``, ...) and storages on simulated GPUs.

``isinstance(t, torch.cuda.FloatTensor)`` is answered by the legacy type's metaclass from
the tensor's dispatch key and dtype (torch/csrc/tensor/python_tensor.cpp
``Tensor_instancecheck``), and ``torch.cuda.FloatTensor(2, 3)`` by the legacy constructor
(torch/csrc/utils/tensor_new.cpp ``legacy_tensor_ctor``: sizes, or a sequence of data, on the
current device). Both see the backing device of a simulated tensor, and that metaclass is
an immutable C type, so the simulation replaces the legacy type objects in ``torch`` and
``torch.cuda`` with classes that answer from the simulated device. ``torch.FloatTensor`` &
co. still construct through the real type; ``torch.set_default_tensor_type`` with a CUDA
type makes factories default to the current GPU, as it does on a GPU machine (it sets the
default dtype and backend).

``torch.UntypedStorage(n, device="cuda")`` — what ``storage.cuda()`` and ``storage.to()`` call
(torch/_utils.py ``_to``) — allocates on the simulated GPU, and a simulated storage's
``device`` (hence ``is_cuda``) is its simulated GPU.
"""

from __future__ import annotations

from typing import Any

import torch

from torchplace.sim.accounting._state import SimState
from torchplace.sim.rules._device_rules import LEGACY_TYPES

__all__ = ["legacy_patches"]


def legacy_patches(state: SimState) -> list[tuple[Any, str, Any]]:
    """(object, attribute, replacement) for the legacy types, their default and storages."""

    def on_gpu(t: torch.Tensor) -> bool:
        return state.label(t) is not None

    class LegacyMeta(type):
        dtype: torch.dtype
        is_cuda: bool
        real: Any

        def __instancecheck__(cls, obj: Any) -> bool:
            if not isinstance(obj, torch.Tensor) or obj.dtype != cls.dtype:
                return False
            if cls.is_cuda:
                return on_gpu(obj)
            return not on_gpu(obj) and isinstance(obj, cls.real)

        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            if not cls.is_cuda:
                return cls.real(*args, **kwargs)
            device = kwargs.pop("device", None)
            if device is None:  # device=None too: the current CUDA device
                device = "cuda"
            if kwargs:
                raise TypeError(
                    f"{cls}() got an unexpected keyword argument '{next(iter(kwargs))}'"
                )
            if len(args) == 1 and isinstance(args[0], torch.Size):
                args = tuple(args[0])
            if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
                return torch.empty(args, dtype=cls.dtype, device=device)
            if len(args) == 1 and not isinstance(args[0], torch.Tensor):
                return torch.tensor(args[0], dtype=cls.dtype, device=device)
            raise TypeError(
                f"{cls}(): expected sizes (ints) or one sequence of data, got "
                f"{', '.join(type(a).__name__ for a in args)}"
            )

        def __repr__(cls) -> str:
            return f"<class '{cls.__module__}.{cls.__name__}'>"

        __str__ = __repr__

    patches: list[tuple[Any, str, Any]] = []
    for module, is_cuda in ((torch, False), (torch.cuda, True)):
        for name, dtype in LEGACY_TYPES.items():
            real = getattr(module, name, None)
            if real is None:
                continue
            cls = LegacyMeta(name, (), {"dtype": dtype, "is_cuda": is_cuda, "real": real})
            cls.__module__ = module.__name__
            cls.is_sparse = False  # type: ignore[attr-defined]
            cls.layout = torch.strided  # type: ignore[attr-defined]
            patches.append((module, name, cls))

    real_set_default = torch.set_default_tensor_type
    made_default: list[bool] = [False]

    def set_default_tensor_type(t: Any) -> None:
        if isinstance(t, str):
            t = getattr(torch.cuda if t.startswith("torch.cuda.") else torch, t.rsplit(".", 1)[1])
        if not isinstance(t, LegacyMeta):
            return real_set_default(t)
        if t.is_cuda:
            torch.set_default_dtype(t.dtype)
            torch.set_default_device("cuda")
            made_default[0] = True
            return None
        if made_default[0]:
            torch.set_default_device(None)
            made_default[0] = False
        return real_set_default(t.real)

    real_storage_new = torch._C.StorageBase.__new__

    def storage_new(cls: type, *args: Any, device: Any = None) -> Any:
        dev = torch.device(device) if isinstance(device, (str, int, torch.device)) else None
        sized = not args or (len(args) == 1 and isinstance(args[0], int))
        if dev is not None and dev.type == "cuda" and cls is torch.UntypedStorage and sized:
            nbytes = args[0] if args else 0
            return torch.empty(nbytes, dtype=torch.uint8, device=dev).untyped_storage()
        return real_storage_new(cls, *args, **({} if device is None else {"device": device}))

    real_device = torch._C.StorageBase.device  # type: ignore[attr-defined]

    def storage_device(self: Any) -> torch.device:
        index = state.storage_label(self)
        return real_device.__get__(self) if index is None else torch.device("cuda", index)

    patches += [
        (torch, "set_default_tensor_type", set_default_tensor_type),
        (torch.UntypedStorage, "__new__", staticmethod(storage_new)),
        (torch.UntypedStorage, "device", property(storage_device)),
    ]
    return patches
