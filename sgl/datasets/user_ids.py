r"""Node ids of a user's edge list: count headers, relabelling, and where node-data rows land.

**Count header.** Some edge-list copies (SNAP's among them) start with a line ``n m``: the node
and edge counts, not an edge. The first row ``(a, b)`` of a two-column, header-less edge list
is taken for one when both hold for the rows after it:

* ``b`` is the number of those rows, or twice or half of it (a file may list each undirected
  edge once or in both directions while counting it once), and
* ``a`` lies between the number of distinct node ids in those rows and the largest of them
  plus one (isolated nodes are counted; ids may start at 0 or 1).

A real edge meets both by chance almost never; the row is dropped with a warning
(``count_header=False`` keeps it as an edge, ``True`` drops the first row unchecked).

**Relabelling** (the default, ``relabel=True``). The nodes are the distinct ids that appear in
the edge list and in keyed feature/label files, numbered ``0..n-1`` in sorted order;
``graph.node_ids[i]`` is node ``i``'s id in the files. A SNAP graph with ids up to 26,196 but
5,242 distinct ids gets 5,242 nodes. With ``relabel=False`` (implied by ``num_nodes=``) the
ids are the node numbers, as stored, and every id below the largest is a node (gaps become
isolated nodes).

**Row-ordered files** (row ``i`` = the ``i``-th node) under relabelling: a file with exactly
one row per distinct id is read in sorted-id order (row ``i`` = the ``i``-th smallest id);
otherwise row ``i`` is the node whose id is ``i`` (the file covers the id space ``0..rows-1``,
and those ids are nodes too). When the ids are already ``0..n-1`` the two readings agree.

Example:
    >>> import numpy as np
    >>> from sgl.datasets.user_ids import node_index
    >>> index = node_index("edges.txt", np.array([10, 500]), np.array([500, 26196]), [], None, None)
    >>> index.num_nodes, index.node_ids.tolist(), index.position(np.array([26196, 10])).tolist()
    (3, [10, 500, 26196], [2, 0])
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional, Sequence, Set

import numpy as np

from sgl.datasets.user_node_data import NodeRows
from sgl.errors import ConfigError, DatasetError

__all__ = ["sorted_unique", "is_count_header", "drop_count_header", "NodeIndex", "node_index"]


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values by one sort (``np.unique`` is far slower on large int64 arrays, numpy 2.x)."""
    values = np.sort(np.asarray(values, dtype=np.int64), kind="stable")
    if values.size < 2:
        return values
    keep = np.empty(values.size, dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def is_count_header(src: np.ndarray, dst: np.ndarray) -> bool:
    """Whether row 0 of ``(src, dst)`` reads as ``num_nodes num_edges`` of the rows after it."""
    rows = src.size - 1
    if rows < 1:
        return False
    a, b = int(src[0]), int(dst[0])
    if b not in (rows, 2 * rows) and 2 * b != rows:
        return False
    ids = sorted_unique(np.concatenate([src[1:], dst[1:]]))
    return ids.size <= a <= int(ids[-1]) + 1


def drop_count_header(path: Path, src: np.ndarray, dst: np.ndarray, mode: Optional[bool]) -> bool:
    """Whether to drop row 0 (``mode``: ``None`` detect and warn, ``True`` drop, ``False`` keep)."""
    if mode is not None and not isinstance(mode, bool):
        raise ConfigError(f"count_header must be true, false or unset (detect), got {mode!r}")
    if mode is False or src.size == 0:
        return False
    if mode is True:
        return True
    if not is_count_header(src, dst):
        return False
    warnings.warn(f"{path.name}: the first row '{int(src[0])} {int(dst[0])}' reads as a node and edge count, not "
                  f"an edge, and is skipped; pass count_header=False to read it as an edge", UserWarning, stacklevel=4)
    return True


@dataclass
class NodeIndex:
    """The nodes of a graph read from files: ``num_nodes`` and, when ids were relabelled,
    ``node_ids`` (sorted; node ``i`` has id ``node_ids[i]`` in the files). ``largest_edge_id``
    is one more than the largest id of an edge endpoint; ``by_rank`` holds the ``id()`` of the
    row-ordered files read in sorted-id order."""

    num_nodes: int
    node_ids: Optional[np.ndarray]
    largest_edge_id: int
    by_rank: Set[int] = field(default_factory=set)

    def position(self, ids: np.ndarray) -> np.ndarray:
        """Node numbers of file ids (every id must be a node)."""
        if self.node_ids is None or int(self.node_ids[-1]) == self.num_nodes - 1:  # ids 0..n-1: no change
            return ids
        return np.searchsorted(self.node_ids, ids)

    def raw_id(self, node: int) -> int:
        return int(node) if self.node_ids is None else int(self.node_ids[node])

    def place(self, rows: NodeRows, what: str) -> np.ndarray:
        """``rows`` as an array over the nodes: features ``[n, d]`` (every node needs a row),
        labels ``[n]`` (``-1`` where a node has none)."""
        values, n = rows.values, self.num_nodes
        out = np.full((n,) + values.shape[1:], -1 if what == "label" else 0, dtype=values.dtype)
        if rows.keyed:
            _check_unique(rows, what)
            if self.node_ids is None and rows.ids.size and int(rows.ids.max()) >= n:
                raise DatasetError(f"{rows.path}: node id {int(rows.ids.max())} is out of range for num_nodes={n}")
            position = self.position(rows.ids)
            out[position] = values
            if what == "feature" and position.size < n:
                missing = np.setdiff1d(np.arange(n), position)
                raise DatasetError(f"{rows.path}: node {self.raw_id(missing[0])} has no feature row ({missing.size} "
                                   f"nodes lack one); give every node a row")
            return out
        if id(rows) in self.by_rank:
            return values
        count = values.shape[0]
        if self.node_ids is None:
            out[:min(count, n)] = values[:n]
            lacking = self.largest_edge_id - 1 if count < self.largest_edge_id else None
        else:
            have = self.node_ids < count
            out[have] = values[self.node_ids[have]]
            lacking = None if have.all() else int(self.node_ids[-1])
        if what == "feature" and lacking is not None:
            raise DatasetError(f"{rows.path}: node id {lacking} has no row in the feature file ({count} rows); give "
                               f"every node a feature row")
        return out


def _check_unique(rows: NodeRows, what: str) -> None:
    ordered = np.sort(rows.ids, kind="stable")
    repeated = np.flatnonzero(ordered[1:] == ordered[:-1])
    if repeated.size:
        raise DatasetError(f"{rows.path}: node {int(ordered[repeated[0]])} has more than one {what} row")


def _check_num_nodes(given: Any) -> int:
    if isinstance(given, bool) or not isinstance(given, int) or given < 1:
        raise ConfigError(f"num_nodes must be a positive integer, got {given!r}")
    return given


def node_index(path: Any, src: np.ndarray, dst: np.ndarray, files: Sequence[NodeRows],
               relabel: Optional[bool], num_nodes: Optional[int]) -> NodeIndex:
    """The node set of an edge list and its node-data ``files`` (see the module docstring)."""
    if relabel is not None and not isinstance(relabel, bool):
        raise ConfigError(f"relabel must be true or false, got {relabel!r}")
    if relabel and num_nodes is not None:
        raise ConfigError("num_nodes sets the size of the raw id space 0..num_nodes-1, so it implies "
                          "relabel=False; remove one of them")
    largest = int(max(src.max(), dst.max())) + 1 if src.size else 0
    if relabel is False or num_nodes is not None:
        return _raw_index(path, largest, files, num_nodes)
    keyed = [rows.ids for rows in files if rows.keyed]
    base = sorted_unique(np.concatenate([src, dst, *keyed]))
    identity = base.size == 0 or int(base[-1]) == base.size - 1
    ids, by_rank = base, set()
    for rows in files:
        if rows.keyed:
            continue
        count = rows.values.shape[0]
        if count == base.size and not identity:
            by_rank.add(id(rows))
        else:  # row i is the node with id i: ids 0..count-1 are nodes
            ids = sorted_unique(np.concatenate([ids, np.arange(count)]))
    if by_rank and ids.size != base.size:
        raise DatasetError(f"{path}: the row-ordered node-data files disagree: one has a row per node id seen "
                           f"({base.size}), another covers ids 0..{ids.size - 1}; key the files by id (an 'id' "
                           f"column) or pass relabel=False")
    if ids.size == 0:
        raise DatasetError(f"{path}: the edge list has no edges and no node data")
    return NodeIndex(int(ids.size), ids, largest, by_rank)


def _raw_index(path: Any, largest: int, files: Sequence[NodeRows], given: Optional[int]) -> NodeIndex:
    sizes: List[int] = [(int(rows.ids.max()) + 1 if rows.ids.size else 0) if rows.keyed else rows.values.shape[0]
                        for rows in files]
    if given is not None:
        given = _check_num_nodes(given)
        if largest > given:
            raise DatasetError(f"{path}: node id {largest - 1} is out of range for num_nodes={given}")
        for rows, size in zip(files, sizes):
            if size > given and not rows.keyed:
                raise DatasetError(f"the {_kind(rows)} file has {size} rows but num_nodes={given}")
        return NodeIndex(given, None, largest)
    n = max([largest, *sizes])
    if n == 0:
        raise DatasetError(f"{path}: the edge list has no edges and no node data")
    return NodeIndex(n, None, largest)


def _kind(rows: NodeRows) -> str:
    return "label" if rows.values.ndim == 1 else "feature"
