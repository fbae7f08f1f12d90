"""OUTRE's partition-group CSR: :class:`GroupCSR`, the neighbour lists of the current group in memory.

With ``group_csr`` OUTRE reads the full neighbour lists of a partition group's nodes (those the
neighbour cache does not hold) when the group starts, and samples from them first. Stores keep
the original node order, so a group CSR is read row by row (OUTRE's partition-ordered files read
it sequentially); its bytes count as ``group_csr`` reads.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from sgl.samplers.outofcore.batches import Partitioning
from sgl.samplers.store import ResidentRows

__all__ = ["GroupCSR"]


class GroupCSR:
    """The resident CSR of the current partition group and the slot map all groups share."""

    def __init__(self, num_nodes: int) -> None:
        self.slot = np.full(num_nodes, -1, dtype=np.int64)
        self.rows: Optional[ResidentRows] = None

    @property
    def nbytes(self) -> int:
        return int(self.slot.nbytes) + (self.rows.nbytes if self.rows is not None else 0)

    @staticmethod
    def max_bytes(store: Any, partitioning: Partitioning, group_size: int,
                  neighbor_cache: Optional[ResidentRows]) -> int:
        """Bytes a group's CSR can take at most: the ``group_size`` largest partitions (their rows not
        in the neighbour cache) plus the shared slot map."""
        deg = store.degree()
        keep = np.ones(store.num_nodes, dtype=bool)
        if neighbor_cache is not None:
            keep[neighbor_cache.nodes] = False
        parts, count = partitioning.parts, partitioning.num_parts
        rows = np.bincount(parts, weights=keep, minlength=count)
        values = np.bincount(parts, weights=deg * keep, minlength=count)
        cost = values * store.index_bytes + 16 * rows
        top = np.sort(cost)[::-1][:group_size]
        return int(top.sum()) + 8 + 8 * store.num_nodes

    def load(self, adjacency: Any, partitioning: Partitioning, parts: Optional[np.ndarray],
             neighbor_cache: Optional[ResidentRows]) -> None:
        """Replace the resident rows by those of partitions ``parts`` (None: drop them); rows the
        neighbour cache holds are not loaded again."""
        if self.rows is not None:
            adjacency.resident.remove(self.rows)
            self.rows.release()
            self.rows = None
        if parts is None:
            return
        nodes = np.concatenate([partitioning.part_nodes[p] for p in parts])
        if neighbor_cache is not None:
            nodes = nodes[neighbor_cache.slot[nodes] < 0]
        self.rows = ResidentRows.load(adjacency, nodes, kind="group_csr", slot=self.slot)
        adjacency.resident.insert(0, self.rows)
