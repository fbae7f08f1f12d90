"""A graph split over processes for distributed sampling (DistDGL's partition + partition book).

Every rank holds, for the nodes it *owns*, their CSR rows (in-neighbour lists, neighbour ids
global) and their feature, label and split-mask rows; plus the :class:`PartitionBook`, which
maps every global node id to ``(owner rank, row on the owner)``. The book is two small
arrays per node (``int32`` owner, ``int64`` local row: 12 bytes a node, 12 GB at a billion
nodes); at that scale one relabels the nodes so every partition is a contiguous id range
(DistDGL does exactly this) and the book shrinks to a ``num_parts + 1`` range table.

Partitions come from METIS (the smallest edge cut: fewest remote neighbours to request) or
contiguous id ranges (no partitioning cost, no locality), as :mod:`sgl.ops.partition` splits a
graph for distributed propagation, or from streaming FENNEL
(:func:`~sgl.samplers.partition.fennel_partition`). A rank owns its nodes in ascending global id
order.

Example (one process owning everything; under ``torchrun`` every rank runs the same line and
keeps its own part):
    >>> import sgl
    >>> from sgl.samplers import DistGraph
    >>> g = sgl.datasets.load("karate")
    >>> dg = DistGraph.from_graph(g, method="range", rank=0, num_parts=2)
    >>> dg.num_local_nodes, dg.nodes[:3].tolist(), int(dg.book.owner[33]), int(dg.book.local[33])
    (17, [0, 1, 2], 1, 16)
    >>> dg.x.shape, dg.split_nodes("train").tolist() == [v for v in g.train_mask.nonzero().flatten().tolist() if v < 17]
    (torch.Size([17, 34]), True)
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from numbers import Integral
from typing import Any, Optional

import numpy as np
import torch

from sgl import comm
from sgl.errors import ConfigError, GraphError

__all__ = ["PARTITION_METHODS", "partition_nodes", "PartitionBook", "DistGraph"]

PARTITION_METHODS = ("metis", "fennel", "range")
_SPLITS = ("train", "val", "test")


def _numpy(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def _check_num_parts(num_parts: Any, num_nodes: int) -> int:
    if isinstance(num_parts, bool) or not isinstance(num_parts, Integral) or num_parts < 1:
        raise ConfigError(f"num_parts must be a positive integer (one partition per process), got {num_parts!r}")
    if num_parts > num_nodes:
        raise ConfigError(f"{num_parts} processes but the graph has only {num_nodes} nodes: every process must own "
                          f"at least one node; run at most {num_nodes} processes")
    return int(num_parts)


def partition_nodes(graph: Any, num_parts: int, method: str = "metis", seed: int = 0) -> np.ndarray:
    """The owner (``[num_nodes]`` int64 in ``[0, num_parts)``) of every node of ``graph``.

    ``method``: ``"metis"`` (``pymetis``, seeded) or ``"range"`` (equal contiguous id ranges),
    both :func:`sgl.ops.partition.partition_assignment` (the split of distributed propagation),
    or ``"fennel"`` (streaming FENNEL). Deterministic, so every rank computes the same partition
    from the same graph.
    """
    indptr = _numpy(graph.indptr).astype(np.int64, copy=False)
    k = _check_num_parts(num_parts, indptr.size - 1)
    if method not in PARTITION_METHODS:
        raise ConfigError(f"unknown partition method {method!r}; choose one of {', '.join(PARTITION_METHODS)}")
    if method == "fennel":
        from sgl.samplers.partition import fennel_partition

        return np.asarray(fennel_partition(indptr, _numpy(graph.indices), k), dtype=np.int64)
    # the split distributed propagation uses too (sgl.ops.dist_propagate_hops)
    from sgl.ops.partition import partition_assignment

    return partition_assignment(graph, k, method, seed=seed).numpy()


@dataclass(frozen=True)
class PartitionBook:
    """Global node id -> ``(owner, local row)``.

    Attributes:
        owner: ``[num_nodes]`` int32, the rank owning each node.
        local: ``[num_nodes]`` int64, the node's row on its owner (rank among the owner's nodes
            in ascending id order).
        offsets: ``[num_parts + 1]``; ``order[offsets[p]:offsets[p + 1]]`` are part ``p``'s nodes.
        order: ``[num_nodes]`` node ids grouped by owner, ascending within a part.
    """

    owner: np.ndarray
    local: np.ndarray
    offsets: np.ndarray
    order: np.ndarray

    @classmethod
    def from_parts(cls, parts: Any, num_parts: Optional[int] = None) -> "PartitionBook":
        """Build the book of an owner array; every one of the ``num_parts`` parts must be non-empty."""
        parts = _numpy(parts)
        if parts.ndim != 1 or parts.dtype.kind not in "iu" or parts.size == 0:
            raise GraphError(f"parts must be a non-empty 1-D integer array (one owner per node), got shape "
                             f"{parts.shape} and dtype {parts.dtype}")
        parts = parts.astype(np.int64, copy=False)
        k = int(parts.max()) + 1 if num_parts is None else _check_num_parts(num_parts, parts.size)
        if parts.min() < 0 or parts.max() >= k:
            raise ConfigError(f"parts has owners in [{int(parts.min())}, {int(parts.max())}] but there are {k} "
                              f"processes; owners must be in [0, {k})")
        counts = np.bincount(parts, minlength=k)
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            raise ConfigError(f"partition(s) {empty[:8].tolist()} of {k} own no node: more processes than the "
                              f"partition has parts; run fewer processes or partition with method='range'")
        order = np.argsort(parts, kind="stable")
        offsets = np.concatenate([[0], np.cumsum(counts)])
        local = np.empty(parts.size, dtype=np.int64)
        local[order] = np.arange(parts.size) - np.repeat(offsets[:-1], counts)
        return cls(parts.astype(np.int32), local, offsets, order)

    @property
    def num_parts(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def num_nodes(self) -> int:
        return int(self.owner.size)

    def owned(self, part: int) -> np.ndarray:
        """Global ids of part ``part``'s nodes, in local-row order (ascending)."""
        return self.order[self.offsets[part]:self.offsets[part + 1]]

    def fingerprint(self) -> int:
        """A 63-bit hash of the owner array: ranks compare it to be sure they share one book."""
        return int.from_bytes(hashlib.blake2b(self.owner.tobytes(), digest_size=8).digest(), "little") >> 1


class DistGraph:
    """One rank's part of a partitioned graph (see the module docstring).

    Args:
        book: the :class:`PartitionBook` (the same on every rank).
        rank: the part this process owns.
        indptr, indices: CSR rows of the owned nodes in local order (``indices`` are global ids,
            in the whole graph's CSR order: the order the samplers draw from).
        x, y: feature / label rows of the owned nodes (optional).
        train_mask, val_mask, test_mask: boolean rows of the owned nodes (optional).
    """

    def __init__(self, book: PartitionBook, rank: int, indptr: Any, indices: Any, x: Optional[torch.Tensor] = None,
                 y: Optional[torch.Tensor] = None, train_mask: Optional[torch.Tensor] = None,
                 val_mask: Optional[torch.Tensor] = None, test_mask: Optional[torch.Tensor] = None) -> None:
        if isinstance(rank, bool) or not isinstance(rank, Integral) or not 0 <= rank < book.num_parts:
            raise ConfigError(f"rank must be in [0, {book.num_parts}) for a {book.num_parts}-part book, got {rank!r}")
        self.book, self.rank = book, int(rank)
        self.nodes = book.owned(self.rank)
        self.indptr = np.ascontiguousarray(_numpy(indptr), dtype=np.int64)
        self.indices = np.ascontiguousarray(_numpy(indices), dtype=np.int64)
        n = self.nodes.size
        if self.indptr.shape != (n + 1,) or self.indptr[0] != 0 or self.indptr[-1] != self.indices.size:
            raise GraphError(f"rank {rank} owns {n} nodes, so indptr must have {n + 1} entries from 0 to "
                             f"len(indices)={self.indices.size}; got shape {self.indptr.shape}")
        if self.indices.size and (self.indices.min() < 0 or self.indices.max() >= book.num_nodes):
            raise GraphError(f"neighbour ids must be global ids in [0, {book.num_nodes})")
        self.x, self.y = x, y
        self.masks = {"train": train_mask, "val": val_mask, "test": test_mask}
        for name, rows in (("x", x), ("y", y), *((f"{s}_mask", m) for s, m in self.masks.items())):
            if rows is not None and (not isinstance(rows, torch.Tensor) or rows.size(0) != n):
                raise GraphError(f"{name} must be a tensor with one row per owned node ({n}), got "
                                 f"{tuple(rows.shape) if isinstance(rows, torch.Tensor) else type(rows).__name__}")

    @classmethod
    def from_graph(cls, graph: Any, method: str = "metis", parts: Any = None, rank: Optional[int] = None,
                   num_parts: Optional[int] = None, seed: int = 0, check: bool = True,
                   x: Optional[torch.Tensor] = None) -> "DistGraph":
        """This rank's part of an in-memory ``graph`` that every rank loaded.

        ``rank`` / ``num_parts`` default to :func:`sgl.comm.get_rank` / :func:`~sgl.comm.get_world_size`
        (one part per process); ``parts`` (an owner per node) overrides ``method``; ``x``
        (``[num_nodes, F]``) replaces ``graph.x``, e.g. ``model.precompute(graph)``. With
        ``check`` and more than one process, the ranks compare their books (one small
        all-gather) and raise :class:`~sgl.errors.GraphError` if they differ.
        """
        world = comm.get_world_size()
        rank = comm.get_rank() if rank is None else rank
        if comm.is_initialized() and num_parts is not None and num_parts != world:
            raise ConfigError(f"num_parts={num_parts} but {world} processes run; use one partition per process")
        indptr = _numpy(graph.indptr).astype(np.int64, copy=False)
        num_nodes = indptr.size - 1
        if num_parts is None and (parts is None or comm.is_initialized()):
            num_parts = world
        if parts is None:
            parts = partition_nodes(graph, num_parts, method, seed)
        elif _numpy(parts).shape != (num_nodes,):
            raise GraphError(f"parts must have one owner per node ({num_nodes}), got shape {_numpy(parts).shape}")
        book = PartitionBook.from_parts(parts, num_parts)
        if check and comm.is_initialized() and world > 1:
            mine = torch.tensor([book.fingerprint(), num_nodes, int(indptr[-1])], dtype=torch.int64)
            seen = [t.tolist() for t in comm.all_gather(mine)]
            if any(s != seen[0] for s in seen):
                raise GraphError(f"the ranks hold different graphs or partitions ([book hash, nodes, edges] per "
                                 f"rank: {seen}); load the same graph and partition it the same way on every rank")
        nodes = book.owned(rank)
        start, deg = indptr[nodes], indptr[nodes + 1] - indptr[nodes]
        local_indptr = np.concatenate([[0], np.cumsum(deg)])
        positions = np.repeat(start - local_indptr[:-1], deg) + np.arange(int(local_indptr[-1]))
        index = torch.from_numpy(nodes)
        if x is not None and (not isinstance(x, torch.Tensor) or x.size(0) != num_nodes):
            raise GraphError(f"x must be a tensor with one row per node ({num_nodes}), got "
                             f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
        rows = {name: None if getattr(graph, name, None) is None else getattr(graph, name)[index]
                for name in ("x", "y", "train_mask", "val_mask", "test_mask")}
        if x is not None:
            rows["x"] = x[index]
        return cls(book, rank, local_indptr, _numpy(graph.indices)[positions], **rows)

    @property
    def num_nodes(self) -> int:
        """Nodes of the whole graph."""
        return self.book.num_nodes

    @property
    def num_local_nodes(self) -> int:
        return int(self.nodes.size)

    @property
    def num_parts(self) -> int:
        return self.book.num_parts

    def max_degree(self) -> int:
        """Largest in-degree among the owned nodes."""
        return int(np.diff(self.indptr).max()) if self.nodes.size else 0

    def split_nodes(self, split: str) -> np.ndarray:
        """Global ids (ascending) of the owned nodes in split ``"train"`` / ``"val"`` / ``"test"``."""
        if split not in _SPLITS:
            raise ConfigError(f"split must be one of {_SPLITS}, got {split!r}")
        mask = self.masks[split]
        if mask is None:
            raise GraphError(f"this DistGraph has no {split}_mask; build it from a graph with a {split} split")
        return self.nodes[_numpy(mask).astype(bool)]

    def with_features(self, x: torch.Tensor) -> "DistGraph":
        """The same part with other feature rows (e.g. a model's transformed features)."""
        return DistGraph(self.book, self.rank, self.indptr, self.indices, x, self.y, *self.masks.values())

    def __repr__(self) -> str:
        return (f"DistGraph(rank={self.rank}/{self.num_parts}, local_nodes={self.num_local_nodes}, "
                f"local_edges={self.indices.size}, num_nodes={self.num_nodes})")
