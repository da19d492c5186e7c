"""The step-time model's constants: what it cannot derive from a GPU's catalog row.

They live in a data file shipped with the package (``torchplace/data/timemodel.toml``),
each with its value, its source, and whether it was fitted (by
``benchmarks/timing/fit.py``, on published measurements) or read from a publication.

Examples:
    >>> from torchplace.timemodel import params
    >>> p = params.load()
    >>> 0 < p["memory.efficiency"] <= 1
    True
    >>> p.fitted("memory.efficiency"), p.fitted("gemm.k_fill")
    (True, False)
    >>> p.replace({"memory.efficiency": 0.5})["memory.efficiency"]
    0.5
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["Params", "load", "parse"]

#: Every constant the model reads, with the range a value must lie in.
_RANGES: dict[str, tuple[float, float]] = {
    "gemm.tensor_core_efficiency": (0.05, 1.0),
    "gemm.simt_efficiency": (0.05, 1.0),
    "gemm.convolution_efficiency": (0.05, 2.0),
    "gemm.k_fill": (0.0, 1024.0),
    "memory.efficiency": (0.05, 1.0),
    "memory.efficiency_gddr": (0.05, 1.0),
    "kernel.overhead_seconds": (0.0, 1e-3),
    "host.op_seconds": (0.0, 1e-3),
    "host.factor": (0.0, 100.0),
    "attention.flash_forward": (0.05, 1.0),
    "attention.flash_backward": (0.05, 1.0),
    "attention.hopper_factor": (0.05, 1.0),
    "attention.efficient_forward_factor": (0.05, 1.0),
    "attention.efficient_backward_factor": (0.05, 1.0),
    "collective.efficiency": (0.05, 1.0),
    "uncertainty.low": (0.1, 1.0),
    "uncertainty.high": (1.0, 10.0),
}


@dataclass(frozen=True)
class Params:
    """The model's constants by dotted name (``"memory.efficiency"``).

    Attributes:
        values: name -> value.
        sources: name -> where the value comes from.
        fitted_names: the names whose value was fitted on published measurements.
    """

    values: Mapping[str, float]
    sources: Mapping[str, str] = field(default_factory=dict)
    fitted_names: frozenset[str] = frozenset()

    def __getitem__(self, name: str) -> float:
        try:
            return self.values[name]
        except KeyError:
            raise KeyError(
                f"the time model has no constant {name!r}; it has {sorted(self.values)}."
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def fitted(self, name: str) -> bool:
        """Whether ``name`` was fitted (rather than read from a publication)."""
        return name in self.fitted_names

    def replace(self, changes: Mapping[str, float]) -> Params:
        """A copy with some values changed (the fit tries values this way).

        Raises:
            ValueError: an unknown name, or a value outside its range.
        """
        values = dict(self.values)
        for name, value in changes.items():
            _check(name, value)
            values[name] = float(value)
        return Params(values, self.sources, self.fitted_names)


def _check(name: str, value: Any) -> None:
    if name not in _RANGES:
        raise ValueError(f"unknown time-model constant {name!r}; known: {sorted(_RANGES)}.")
    low, high = _RANGES[name]
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise ValueError(
            f"time-model constant {name} must be a number in [{low}, {high}], got {value!r}."
        )


def parse(document: Mapping[str, Any]) -> Params:
    """Validate a parsed ``timemodel.toml`` document.

    Raises:
        ValueError: a missing or unknown constant, a value out of range, or no source.
    """
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    fitted: set[str] = set()
    for section, table in document.items():
        if not isinstance(table, Mapping):
            raise ValueError(f"[{section}] must be a table of constants.")
        for key, entry in table.items():
            name = f"{section}.{key}"
            if not isinstance(entry, Mapping) or set(entry) - {"value", "fitted", "source"}:
                raise ValueError(f"{name} must be {{ value = ..., fitted = ..., source = ... }}.")
            _check(name, entry.get("value"))
            source = entry.get("source")
            if not isinstance(source, str) or not source.strip():
                raise ValueError(f"{name} has no source.")
            if not isinstance(entry.get("fitted"), bool):
                raise ValueError(f"{name}: fitted must be true or false.")
            values[name] = float(entry["value"])
            sources[name] = source
            if entry["fitted"]:
                fitted.add(name)
    missing = sorted(set(_RANGES) - set(values))
    if missing:
        raise ValueError(f"the time model's data file lacks {missing}.")
    return Params(values, sources, frozenset(fitted))


@functools.cache
def load() -> Params:
    """The constants shipped with torchplace (read once).

    Raises:
        RuntimeError: the installed data file is missing or invalid.
    """
    resource = resources.files("torchplace") / "data" / "timemodel.toml"
    try:
        return parse(tomllib.loads(resource.read_text(encoding="utf-8")))
    except (OSError, tomllib.TOMLDecodeError, ValueError) as e:
        raise RuntimeError(
            f"torchplace's time-model constants ({resource}) could not be read: {e} "
            "Reinstall torchplace (pip install --force-reinstall torchplace)."
        ) from e
