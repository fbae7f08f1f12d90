"""Vertex partitioning and the two messages distributed counting needs, over :mod:`sgl.comm`.

Vertices are split into contiguous blocks, one per rank (:class:`VertexPartition`). Two
collectives move data between the owners:

* :func:`route` sends every row of a table to the rank that owns the vertex in its first
  column (one uneven ``all_to_all``); the receiver gets all rows about its vertices;
* :func:`ask` sends requests to chosen ranks and brings back one answer row per request, in
  the order asked (two ``all_to_all`` calls); :func:`lookup` uses it to read rows of the
  owners' vertex tables, each distinct id once.

Both also run in a single process (``sgl.comm`` not initialised), where they are local copies.

    >>> import numpy as np
    >>> part = VertexPartition(10, world_size=3, rank=1)
    >>> part.lo, part.hi, part.owner(np.array([0, 3, 4, 9])).tolist()
    (3, 6, [0, 1, 1, 2])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional

import numpy as np
import torch

import sgl.comm as comm
from sgl.errors import GraphError

__all__ = ["VertexPartition", "route", "ask", "lookup"]


@dataclass(frozen=True)
class VertexPartition:
    """Vertex ``v`` belongs to rank ``r`` when ``bounds[r] <= v < bounds[r + 1]`` (equal-size blocks)."""

    num_nodes: int
    world_size: int
    rank: int

    @property
    def bounds(self) -> np.ndarray:
        return (np.arange(self.world_size + 1, dtype=np.int64) * self.num_nodes) // self.world_size

    @property
    def lo(self) -> int:
        return int(self.bounds[self.rank])

    @property
    def hi(self) -> int:
        return int(self.bounds[self.rank + 1])

    @property
    def num_local(self) -> int:
        return self.hi - self.lo

    def owner(self, vertices: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.bounds, vertices, side="right") - 1

    def local(self, vertices: np.ndarray) -> np.ndarray:
        """Positions of owned ``vertices`` in this rank's block."""
        vertices = np.asarray(vertices, dtype=np.int64)
        if vertices.size and (vertices.min() < self.lo or vertices.max() >= self.hi):
            raise GraphError(f"rank {self.rank} owns vertices [{self.lo}, {self.hi}), asked about "
                             f"{vertices.min()}..{vertices.max()}")
        return vertices - self.lo


def _split(rows: np.ndarray, dest: np.ndarray, world: int) -> List[torch.Tensor]:
    order = np.argsort(dest, kind="stable")
    counts = np.bincount(dest, minlength=world)
    return list(torch.from_numpy(np.ascontiguousarray(rows[order])).split(counts.tolist()))


def _all_to_all(parts: List[torch.Tensor], timeout: Optional[float]) -> List[torch.Tensor]:
    if not comm.is_initialized():
        return parts
    # host tables travel on the backend's device (NCCL moves only GPU tensors); callers take them back
    return comm.all_to_all([comm.to_wire(p) for p in parts], timeout=timeout)


def route(rows: np.ndarray, part: VertexPartition, timeout: Optional[float] = None) -> np.ndarray:
    """Deliver each row of an int64 ``[k, columns]`` table to the owner of ``rows[:, 0]``; returns
    the rows this rank received."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if rows.ndim != 2:
        raise GraphError(f"route needs a [rows, columns] table, got shape {rows.shape}")
    received = _all_to_all(_split(rows, part.owner(rows[:, 0]), part.world_size), timeout)
    return torch.cat(received).cpu().numpy() if received else rows[:0]


def ask(rows: np.ndarray, dest: np.ndarray, answer: Callable[[np.ndarray], np.ndarray], part: VertexPartition,
        timeout: Optional[float] = None) -> np.ndarray:
    """Send ``rows[i]`` to rank ``dest[i]``, which replies ``answer(received_rows)`` (one int64 row
    per request); returns the replies in the order of ``rows``. Every rank must call it."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    asked = _all_to_all(_split(rows, dest, part.world_size), timeout)
    replies = _all_to_all([torch.from_numpy(np.ascontiguousarray(answer(q.cpu().numpy()), dtype=np.int64))
                           for q in asked], timeout)
    merged = torch.cat(replies).cpu().numpy()
    out = np.empty_like(merged)
    out[np.argsort(dest, kind="stable")] = merged
    return out


def lookup(ids: np.ndarray, table: np.ndarray, part: VertexPartition, timeout: Optional[float] = None) -> np.ndarray:
    """``table_of_owner[id - owner.lo]`` for every id (any rank's vertex); ``table`` is this rank's block."""
    ids = np.asarray(ids, dtype=np.int64)
    table = np.ascontiguousarray(table, dtype=np.int64)
    if table.ndim != 2 or table.shape[0] != part.num_local:
        raise GraphError(f"lookup needs a [{part.num_local}, columns] table of this rank's vertices, "
                         f"got shape {table.shape}")
    unique, inverse = np.unique(ids, return_inverse=True)
    values = ask(unique, part.owner(unique), lambda q: table[part.local(q)].reshape(len(q), table.shape[1]), part,
                 timeout)
    return values.reshape(unique.size, table.shape[1])[inverse]
