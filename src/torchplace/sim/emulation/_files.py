"""Checkpoints inside a simulation: ``torch.save`` and ``torch.load`` of simulated tensors.

- Saving: a simulated tensor's storage is tagged with its simulated device (``cuda:N``),
  as a GPU run would tag it, so the file loads the same way on a GPU machine.
- Where a file of simulated tensors goes (the rule, documented in docs/sim.md, "Files the
  script saves"): a simulated run never destroys data.
  - With real values a file goes where the script says, unless that path holds a file
    the run did not make (one that existed, unchanged, before the simulation began): then
    the write goes to the run's scratch folder, and the report names both paths. A file
    the run made it may replace (last.pt each epoch).
  - With placeholder values there is no data to write: the file holds the tensors'
    metadata only (``torch.serialization.skip_data``), so it can never pass for a real
    checkpoint, and it goes to the scratch folder.
  - ``write_files=True`` (``--write-files``; the pytest plugin, whose tests save where
    the test says) writes every file where the script says.
  A later ``torch.load`` of a redirected path in the same run reads the scratch copy.
- Loading: storages tagged ``cuda:N`` (a file saved on a real GPU) land on simulated
  ``cuda:N`` when no ``map_location`` says otherwise, and are accounted there, as they would
  be on a GPU machine; ``map_location="cpu"`` keeps them on the host.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from torchplace.sim.accounting._state import SimState

__all__ = ["SimFiles", "current"]

_PRIORITY = 5  # before torch's own taggers (cpu 10, cuda 20, meta 22)
_current: SimFiles | None = None


def current() -> SimFiles | None:
    """The running simulation's file handling (for torchplace.save / load), or None."""
    return _current


class _Found(Exception):
    pass


class SimFiles:
    """Redirects, tags and restores files for one simulation (see the module docstring)."""

    def __init__(self, state: SimState, resolve: Callable[[Any], int | None], *, in_place: bool):
        self.state = state
        self.resolve = resolve
        self.in_place = in_place
        self.redirects: dict[str, str] = {}  # the script's path -> where it was written
        self.placeholders: set[str] = set()  # files written without data
        self.created: set[str] = set()  # paths this run made (it may write them again)
        self.started_ns = time.time_ns()
        self.scratch: str | None = None

    # --- torch.serialization's tagger and deserializer ----------------------------------
    def tag(self, storage: Any) -> str | None:
        label = self.state.storage_label(storage) if hasattr(storage, "_cdata") else None
        return None if label is None else f"cuda:{label}"

    def deserialize(self, storage: Any, location: str) -> Any:
        if not location.startswith("cuda"):
            return None
        count = len(self.state.devices)
        try:
            index = self.resolve(location)
        except RuntimeError:
            index = None
        if index is None:  # torch/serialization.py validate_cuda_device
            device = torch.device(location).index or 0
            raise RuntimeError(
                f"Attempting to deserialize object on CUDA device {device} but "
                f"torch.cuda.device_count() is {count}. Please use torch.load with "
                "map_location to map your storages to an existing device."
            )
        self.state.transfer("h2d", storage.nbytes(), index)
        if not self.state.real:
            storage = torch.UntypedStorage(storage.nbytes(), device="meta")
        self.state.register_storage(storage, index)
        return storage

    @contextlib.contextmanager
    def registered(self) -> Iterator[None]:
        """Put the tagger and deserializer first in torch.serialization's registry."""
        global _current
        import torch.serialization as ser

        ser.register_package(_PRIORITY, self.tag, self.deserialize)
        entry = next(e for e in ser._package_registry if e[1] == self.tag)
        _current = self
        try:
            yield
        finally:
            _current = None
            ser._package_registry.remove(entry)

    # --- torch.save / torch.load ----------------------------------------------------------
    def holds_simulated(self, obj: Any) -> bool:
        """Whether pickling ``obj`` would reach a simulated tensor (structure only)."""
        state = self.state

        class Scan(pickle.Pickler):
            def reducer_override(self, o: Any) -> Any:
                if isinstance(o, torch.Tensor):
                    if state.label(o) is not None:
                        raise _Found
                    return (int, ())
                return NotImplemented

        try:
            Scan(io.BytesIO(), protocol=2).dump(obj)
        except _Found:
            return True
        except Exception:
            return True  # cannot tell: keep the script's path safe
        return False

    def target(self, path: str | os.PathLike[str], obj: Any) -> tuple[str, bool]:
        """Where a save of ``obj`` to ``path`` goes, and whether it is data-less (the rule
        is in the module docstring)."""
        path = os.fspath(path)
        absolute = os.path.abspath(path)
        if not self.holds_simulated(obj):
            self._creates(absolute)
            return path, False
        placeholder = not self.state.real
        if self.in_place:
            self._creates(absolute)
            self._record(absolute, absolute, "in place (write_files)")
            if placeholder:
                self.placeholders.add(absolute)
            return path, placeholder
        if not placeholder and absolute not in self.redirects and self._ours(absolute):
            self._creates(absolute)
            self._record(absolute, absolute, "made by this run")
            return path, False
        if self.scratch is None:
            self.scratch = tempfile.mkdtemp(prefix="torchplace-sim-files-")
        written = os.path.join(self.scratch, absolute.strip(os.sep).replace(os.sep, "__"))
        self.redirects[absolute] = written
        if placeholder:
            self.placeholders.add(written)
            why = "placeholder values: the file holds shapes only, never in your folders"
        else:
            self.placeholders.discard(written)
            why = "a file the run did not create is there: a simulation never replaces it"
        self._record(absolute, written, why)
        return written, placeholder

    def _ours(self, absolute: str) -> bool:
        """Whether the run may write ``absolute``: nothing is there, or what is there was
        made (or changed) since the simulation began."""
        if absolute in self.created:
            return True
        try:
            return os.stat(absolute).st_ctime_ns >= self.started_ns
        except FileNotFoundError:
            return not os.path.lexists(absolute)  # a dangling link is not ours to follow
        except OSError:
            return False

    def _creates(self, absolute: str) -> None:
        if not os.path.lexists(absolute):
            self.created.add(absolute)

    def _record(self, path: str, written: str, why: str) -> None:
        entry = {
            "path": path,
            "written_to": written,
            "values": "real" if self.state.real else "placeholder (metadata only)",
            "why": why,
        }
        if entry not in self.state.files:
            self.state.files.append(entry)

    def source(self, path: str | os.PathLike[str]) -> tuple[str, bool]:
        """Where a load of ``path`` reads from in this run, and whether it is data-less."""
        absolute = os.path.abspath(os.fspath(path))
        written = self.redirects.get(absolute)
        if written is None:
            return os.fspath(path), absolute in self.placeholders
        return written, written in self.placeholders

    def save(self, real: Callable[..., Any], obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(f, (str, os.PathLike)):
            return real(obj, f, *args, **kwargs)
        path, placeholder = self.target(f, obj)
        with torch.serialization.skip_data() if placeholder else contextlib.nullcontext():
            return real(obj, path, *args, **kwargs)

    def load(self, real: Callable[..., Any], f: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(f, (str, os.PathLike)):
            return real(f, *args, **kwargs)
        path, placeholder = self.source(f)
        with torch.serialization.skip_data() if placeholder else contextlib.nullcontext():
            return real(path, *args, **kwargs)
