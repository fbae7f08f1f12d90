"""``VENDStore``: VEND codes in memory in front of the SQLite edge store.

An edge query first tests the in-memory codes (:class:`VENDCodes`): a certified
``NonNeighbor`` is answered at once, and only ``Uncertain`` pairs (and ``Neighbor`` pairs,
unless ``answer_neighbors=True``, since a store usually has to be read for an edge's data
anyway) reach the store. On a query mix dominated by non-edges most store lookups disappear.

Updates are atomic: one call of :meth:`VENDStore.update` is one SQLite transaction that
changes the edges, re-encodes the vertices whose codes the change invalidates (reading their new
neighbour lists inside the same transaction) and writes those codes next to the edges. The
in-memory codes change only after the commit; another process's commit is noticed through
SQLite's ``data_version`` and the codes are reloaded before the next query or update.

    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "g.db")
    >>> edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0]])
    >>> with VENDStore.build(path, edges, k=1, num_nodes=6) as db:
    ...     print(db.has_edges([0, 0, 4], [1, 2, 5]).tolist(), db.stats.store_queries)
    ...     result = db.update(insert=[[4, 5]], delete=[[0, 1]])
    ...     print(db.has_edge(4, 5), db.has_edge(0, 1), db.num_edges, result.version)
    [True, False, False] 1
    True False 4 1
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

import numpy as np

from sgl.analytics.vend.adjacency import as_edge_array, as_pairs, graph_csr, undirected_csr
from sgl.analytics.vend.baselines import OneHashBloomFilter, RangeFilter, VertexBloomFilter
from sgl.analytics.vend.codes import OneHashVENDCodes, PairType, VENDCodes
from sgl.analytics.vend.layout import CodeLayout
from sgl.analytics.vend.store import EdgeStore
from sgl.errors import ConfigError, StoreError

__all__ = ["VENDStore", "QueryStats", "UpdateResult"]

PathLike = Union[str, os.PathLike]
#: code kinds a store can hold (the name is persisted in its meta table)
CODE_KINDS = {cls.__name__: cls for cls in (VENDCodes, OneHashVENDCodes, VertexBloomFilter, OneHashBloomFilter, RangeFilter)}


@dataclass
class QueryStats:
    """Counters since the store was opened (or :meth:`VENDStore.reset_stats`)."""

    queries: int = 0
    certified: int = 0        # answered NonNeighbor from memory
    answered_in_memory: int = 0
    store_queries: int = 0

    @property
    def certified_share(self) -> float:
        return self.certified / self.queries if self.queries else 0.0


@dataclass(frozen=True)
class UpdateResult:
    """What one committed update batch did."""

    inserted: int
    deleted: int
    reencoded: int
    version: int


class VENDStore:
    """An edge store answering edge queries through VEND codes first; see the module docstring.

    Args:
        store: an open :class:`EdgeStore`.
        answer_neighbors: also answer certified ``Neighbor`` pairs from memory.
    """

    def __init__(self, store: EdgeStore, *, answer_neighbors: bool = False) -> None:
        self.store = store
        self.answer_neighbors = bool(answer_neighbors)
        self.stats = QueryStats()
        #: seconds spent computing the codes and writing the store (set by :meth:`build`)
        self.build_seconds: Dict[str, float] = {}
        try:
            self._load_codes()
        except BaseException:
            store.close()
            raise

    # -- building and opening -------------------------------------------------------------------
    @classmethod
    def build(cls, path: PathLike, source: Any, k: int, *, num_nodes: Optional[int] = None, kind: str = "VENDCodes",
              overwrite: bool = False, progress: bool = False, **options: Any) -> "VENDStore":
        """Build a store at ``path`` for a :class:`~sgl.data.Graph` or an ``(E, 2)`` edge array.

        ``kind`` picks the codes (``"VENDCodes"``, the paper's ``"OneHashVENDCodes"``; the baselines ``"VertexBloomFilter"`` and
        ``"RangeFilter"`` for comparisons). An existing ``path`` is kept unless ``overwrite``.
        """
        if kind not in CODE_KINDS:
            raise ConfigError(f"kind must be one of {', '.join(CODE_KINDS)}; got {kind!r}")
        if not overwrite and os.path.exists(path):
            raise StoreError(f"{path} already exists; pass overwrite=True (--overwrite) to replace it")
        if hasattr(source, "edge_index") and hasattr(source, "num_nodes"):
            CodeLayout(max(source.num_nodes, 1), k)
            indptr, indices, _ = graph_csr(source)
        else:
            edges = as_edge_array(source)
            if num_nodes is None:
                num_nodes = int(edges.max()) + 1 if edges.size else 1
            CodeLayout(num_nodes, k)
            indptr, indices = undirected_csr(edges, num_nodes)
        started = time.perf_counter()
        codes = CODE_KINDS[kind].from_csr(indptr, indices, k, progress=progress)
        encoded = time.perf_counter()
        store = EdgeStore.create(path, indptr, indices, codes.words, kind=kind, overwrite=overwrite, progress=progress)
        db = cls(store, **options)
        db.build_seconds = {"codes": encoded - started, "store": time.perf_counter() - encoded}
        return db

    @classmethod
    def open(cls, path: PathLike, *, verify: bool = True, **options: Any) -> "VENDStore":
        """Open a store built by :meth:`build` (a damaged file raises :class:`~sgl.errors.StoreError`)."""
        return cls(EdgeStore.open(path, verify=verify), **options)

    def _load_codes(self) -> None:
        meta = self.store.meta()
        if self.store.kind not in CODE_KINDS:
            raise StoreError(f"{self.store.path} holds codes of unknown kind {self.store.kind!r}")
        self.codes = CODE_KINDS[self.store.kind](self.store.read_codes())
        self._version = int(meta["version"])
        self._data_version = self.store.data_version()

    def _sync(self) -> None:
        """Reload the codes if another connection committed an update since we last looked."""
        if self.store.data_version() != self._data_version:
            if self.store.version != self._version:
                self._load_codes()
            self._data_version = self.store.data_version()

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "VENDStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- queries --------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return self.store.num_nodes

    @property
    def num_edges(self) -> int:
        return self.store.num_edges

    @property
    def path(self):
        return self.store.path

    def reset_stats(self) -> None:
        self.stats = QueryStats()

    def has_edges(self, u: Any, v: Any) -> np.ndarray:
        """Whether each ``(u[i], v[i])`` is an edge; certified non-edges never reach the store."""
        u, v = as_pairs(u, v, self.num_nodes)
        self._sync()
        answer = self.codes.test_batch(u, v)
        out = answer == np.uint8(PairType.Neighbor)
        ask = answer == np.uint8(PairType.Uncertain)
        if not self.answer_neighbors:
            ask |= out
        if ask.any():
            out[ask] = self.store.has_edges(u[ask], v[ask])
        self.stats.queries += u.size
        self.stats.certified += int(np.count_nonzero(answer == np.uint8(PairType.NonNeighbor)))
        self.stats.answered_in_memory += int(u.size - np.count_nonzero(ask))
        self.stats.store_queries += int(np.count_nonzero(ask))
        return out

    def has_edge(self, u: int, v: int) -> bool:
        return bool(self.has_edges([u], [v])[0])

    def edges(self, u: int) -> np.ndarray:
        """The sorted neighbours of ``u`` (from the store)."""
        return self.store.edges(u)

    # -- updates --------------------------------------------------------------------------------
    def update(self, insert: Any = None, delete: Any = None) -> UpdateResult:
        """Delete, then insert, undirected edges, and repair the codes: all in one transaction."""
        self._sync()
        with self.store.transaction():
            if self.store.version != self._version:   # a writer committed between _sync and BEGIN
                self._load_codes()
            inserted, deleted = self.store.apply_edges(insert, delete)
            stale = self.codes.stale_vertices(insert, delete)
            words = self.codes.encode(*self.store.neighbors_csr(stale))
            self.store.write_codes(stale, words)
        self.codes.assign(stale, words)
        self._version += 1
        self._data_version = self.store.data_version()
        return UpdateResult(inserted, deleted, int(stale.size), self._version)

    def insert_edges(self, edges: Any) -> UpdateResult:
        return self.update(insert=edges)

    def delete_edges(self, edges: Any) -> UpdateResult:
        return self.update(delete=edges)

    def __repr__(self) -> str:
        return (f"VENDStore({str(self.path)!r}, num_nodes={self.num_nodes}, k={self.codes.k}, "
                f"codes={type(self.codes).__name__})")
