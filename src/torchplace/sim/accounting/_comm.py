"""Collectives on simulated GPUs: what each rank sends, and how long that takes.

The process group behind a simulated rank moves no data (torch's fake process group, or
gloo on the host), so the time a collective would take on the GPUs is the simulator's to
price. NCCL's ring algorithms move, per rank (NCCL docs, "Performance considerations":
algorithm bandwidth vs bus bandwidth; nccl-tests doc/PERFORMANCE.md):

- all-reduce: ``2 (W-1)/W × size``;
- all-gather and reduce-scatter: ``(W-1)/W × size`` (size: the gathered / reduced buffer);
- all-to-all: ``(W-1)/W × size``; broadcast and reduce: ``size``.

over the slowest link the group crosses: NVLink (the catalog's GPU-to-GPU bandwidth per
direction) within a node, the network between nodes (the catalog's network per GPU), at
the bus bandwidth NCCL reaches on it (:mod:`torchplace.timemodel.comm`), plus the kernel
launch. Latency terms (a few µs per ring step) are left out: they matter only for small
messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["COLLECTIVES", "Topology", "bus_bytes", "collective_of"]

#: aten-level collective name -> the NCCL algorithm family that prices it
COLLECTIVES = {
    "allreduce_": "all_reduce",
    "all_reduce": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "allreduce_coalesced_": "all_reduce",
    "_allgather_base_": "all_gather",
    "allgather_": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "all_gather_into_tensor_coalesced": "all_gather",
    "_reduce_scatter_base_": "reduce_scatter",
    "reduce_scatter_": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "alltoall_": "all_to_all",
    "alltoall_base_": "all_to_all",
    "all_to_all_single": "all_to_all",
    "broadcast_": "broadcast",
    "broadcast": "broadcast",
    "reduce_": "broadcast",
}


def collective_of(func: Any) -> str | None:
    """The collective family of a c10d operator (``c10d._allgather_base_``), or None."""
    namespace = getattr(func, "namespace", "")
    if namespace not in ("c10d", "_c10d_functional"):
        return None
    return COLLECTIVES.get(func._schema.name.split("::", 1)[-1])


def bus_bytes(kind: str, size: int, world: int) -> float:
    """Bytes each rank sends for a collective over ``size`` bytes among ``world`` ranks."""
    if world <= 1:
        return 0.0
    share = (world - 1) / world
    if kind == "all_reduce":
        return 2 * share * size
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return share * size
    return float(size)


@dataclass(frozen=True)
class Topology:
    """How the simulated ranks are laid out: ``gpus_per_node`` GPUs on each of ``nodes``."""

    nodes: int = 1
    gpus_per_node: int = 1
    network_bytes_per_s: float = 50e9

    def crosses_nodes(self, world: int) -> bool:
        """Whether a group of ``world`` ranks (numbered node by node) spans nodes."""
        return self.nodes > 1 and world > self.gpus_per_node

    def seconds(self, bus: float, world: int, link_bytes_per_s: float, launch: float) -> float:
        """Time to send ``bus`` bytes per rank in a group of ``world`` ranks."""
        from torchplace.timemodel import comm, params

        bandwidth = self.network_bytes_per_s if self.crosses_nodes(world) else link_bytes_per_s
        return comm.collective_seconds(bus, bandwidth, params.load(), launch)
