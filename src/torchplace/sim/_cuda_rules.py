"""CUDA's rules that come from torch's own code and data, installed for one simulation.

- autocast: :mod:`torchplace.sim._autocast` (the AutocastCUDA operator table, generated);
- the attention kernel: :mod:`torchplace.sim._sdpa` (sdp_utils.cpp's checks, ported);
- deterministic-algorithm alerts: :mod:`torchplace.sim._determinism` (looked up per operator);
- ``torch.cuda.set_sync_debug_mode``: :mod:`torchplace.sim._sync_debug`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchplace.sim import _autocast, _sdpa, _sync_debug

if TYPE_CHECKING:
    from torchplace.sim._state import SimState

__all__ = ["installed"]


@contextlib.contextmanager
def installed(state: SimState) -> Iterator[None]:
    """The rules in force while ``state``'s simulation runs."""
    with _autocast.installed(state.label), _sdpa.installed(), _sync_debug.installed(state):
        yield
