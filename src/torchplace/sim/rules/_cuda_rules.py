"""CUDA's rules that come from torch's own code and data, installed for one simulation.

- autocast: :mod:`torchplace.sim.rules._autocast` (the AutocastCUDA operator table, generated);
- the attention kernel: :mod:`torchplace.sim.rules._sdpa` (sdp_utils.cpp's checks, ported);
- deterministic-algorithm alerts: :mod:`torchplace.sim.rules._determinism` (looked up per operator);
- ``torch.cuda.set_sync_debug_mode``: :mod:`torchplace.sim.rules._sync_debug`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchplace.sim.rules import _autocast, _sdpa, _sync_debug

if TYPE_CHECKING:
    from torchplace.sim.accounting._state import SimState

__all__ = ["installed"]


@contextlib.contextmanager
def installed(state: SimState) -> Iterator[None]:
    """The rules in force while ``state``'s simulation runs."""
    with _autocast.installed(state.label), _sdpa.installed(), _sync_debug.installed(state):
        yield
