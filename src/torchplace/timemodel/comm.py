"""Collectives: NCCL's ring algorithms at the bus bandwidth NCCL reaches.

Each rank sends ``bus`` bytes (:func:`torchplace.sim.accounting._comm.bus_bytes`:
``2(W-1)/W`` of the buffer for an all-reduce, ``(W-1)/W`` for all-gather and reduce-scatter)
over the slowest link the group crosses. NCCL reaches ``collective.efficiency`` of that
link's line rate (its protocol's overhead; nccl-tests reports it as *bus bandwidth*), so a
collective takes ``bus / (link × efficiency)`` plus one kernel launch.
``benchmarks/timing_accuracy.py`` checks the bus bandwidth this gives against published
nccl-tests results (``benchmarks/timing/nccl.csv``).

Examples:
    >>> from torchplace.timemodel import comm, params
    >>> p = params.load()
    >>> round(comm.bus_bandwidth(450e9, p) / 1e9)  # H100 NVLink, per direction
    369
"""

from __future__ import annotations

from torchplace.timemodel.params import Params

__all__ = ["bus_bandwidth", "collective_seconds"]


def bus_bandwidth(link_bytes_per_s: float, params: Params) -> float:
    """The bus bandwidth NCCL reaches over a link of this line rate (per direction)."""
    return link_bytes_per_s * params["collective.efficiency"]


def collective_seconds(bus: float, link_bytes_per_s: float, params: Params, launch: float) -> float:
    """Seconds for a rank to send ``bus`` bytes over the link, launch included."""
    if bus <= 0:
        return 0.0
    return bus / bus_bandwidth(link_bytes_per_s, params) + launch
