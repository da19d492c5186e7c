"""CUDA's rules that come from torch's own code and data, installed for one simulation.

- autocast: :mod:`torchplace.sim._autocast` (the AutocastCUDA operator table, generated);
- the attention kernel: :mod:`torchplace.sim._sdpa` (sdp_utils.cpp's checks, ported);
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchplace.sim import _autocast, _sdpa

if TYPE_CHECKING:
    from torchplace.sim._state import SimState

__all__ = ["installed"]


@contextlib.contextmanager
def installed(state: SimState) -> Iterator[None]:
    """The rules in force while ``state``'s simulation runs."""
    with _autocast.installed(state.label), _sdpa.installed():
        yield
