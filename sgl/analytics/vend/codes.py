"""VEND vertex codes: certify in memory that most vertex pairs are *not* edges (Li et al., ICDE'23).

Each vertex ``x`` of an undirected graph with ``n`` vertices holds ``K`` 64-bit words (layout in
:mod:`sgl.analytics.vend.layout`, choice of code in :mod:`sgl.analytics.vend.encode`). The one-
sided test of ``x``'s code about ``y`` is

* ``y`` inside the certified interval ``[lo, hi]`` of ``x`` (``[0, n-1]`` for an exact list): a
  binary search in the stored ids says ``Neighbor`` or ``NonNeighbor``, exactly;
* otherwise the code's ``h`` bitmap bits :func:`~sgl.analytics.vend.layout.bitmap_slots`
  ``(y, H, i)``, ``i < h``: any 0 means ``NonNeighbor`` (no neighbour set it), all 1 ``Uncertain``;
  a code without bitmap bits says ``Uncertain``.

:class:`VENDCodes` picks ``h`` per vertex (``hashes="optimal"``: the ``h`` minimising the bitmap's
expected false-positive rate ``(1 - exp(-h r / H))^h`` for its ``r`` hashed neighbours, stored in 4
header bits); :class:`OneHashVENDCodes` is the paper's code (``h = 1``, no hash-count field).

``test(u, v)`` combines ``side(u, v)`` and ``side(v, u)`` and keeps the more certain answer
(``min`` in the order ``Neighbor < NonNeighbor < Uncertain``). A ``NonNeighbor`` is never wrong:
a stored interval is exact, and every neighbour outside it set its bit.

Maintenance keeps that true after any sequence of edge inserts and deletes: a side whose answer
about an updated pair would now be wrong (``NonNeighbor`` for an inserted edge, ``Neighbor``
for a deleted one) is re-encoded from the vertex's current neighbour list, as is, by default, a
side that says ``Uncertain`` about a deleted edge (its stale bit would cost certifications). No
other answer of any code changes meaning, because no other pair changed.

    >>> import numpy as np
    >>> from sgl.analytics.vend import VENDCodes, MemoryAdjacency, PairType
    >>> edges = np.array([[0, 1], [0, 2], [0, 3], [0, 4], [2, 3]])
    >>> codes = VENDCodes.from_edges(edges, k=1, num_nodes=6)
    >>> codes.test(0, 5), codes.test(2, 3)
    (<PairType.NonNeighbor: 2>, <PairType.Neighbor: 1>)
    >>> adj = MemoryAdjacency.from_edges(edges, num_nodes=6)
    >>> adj.apply(insert=np.array([[0, 5]]))
    >>> _ = codes.update(adj, insert=np.array([[0, 5]]))
    >>> codes.test(0, 5) is not PairType.NonNeighbor
    True
"""
from __future__ import annotations

import enum
import os
from typing import Any, Dict, Optional, Union

import numpy as np

from sgl.analytics.vend.adjacency import as_edge_array, as_pairs, as_vertex_ids, graph_csr, undirected_csr
from sgl.analytics.vend.encode import encode_neighbors
from sgl.analytics.vend.layout import FULL_HASH, LEFT, RIGHT, CodeLayout, bitmap_slots, get_field, hash_keys, read_bits
from sgl.errors import GraphError

__all__ = ["PairType", "VENDCodes", "OneHashVENDCodes"]

PathLike = Union[str, os.PathLike]


class PairType(enum.IntEnum):
    """Answer of a VEND test; the values order certainty as in the paper (smaller = more certain)."""

    Neighbor = 1
    NonNeighbor = 2
    Uncertain = 4


_NEIGHBOR, _NON, _UNCERTAIN = (np.uint8(t) for t in (PairType.Neighbor, PairType.NonNeighbor, PairType.Uncertain))
_ONE = np.uint64(1)


class VENDCodes:
    """``K`` machine words per vertex that certify non-edges; see the module docstring for the math.

    Args:
        words: ``(num_nodes, k)`` ``uint64`` codes (from :meth:`from_edges`, :meth:`from_graph`,
            :meth:`from_csr`, or a store).
        refresh_on_delete: re-encode a side that says ``Uncertain`` about a deleted edge
            (the paper's behaviour); ``False`` re-encodes only sides that became wrong.
    """

    #: whether codes use their leftover bits as a bitmap (False: the range-filter baseline)
    bitmap = True
    #: bitmap hash functions: ``"optimal"`` (``h`` per vertex, stored) or ``"one"`` (the paper's)
    hashes = "optimal"

    def __init__(self, words: np.ndarray, *, refresh_on_delete: bool = True) -> None:
        words = np.asarray(words)
        if words.ndim != 2 or words.dtype != np.uint64 or words.shape[0] < 1 or words.shape[1] < 1:
            raise GraphError(f"VEND codes must be a (num_nodes, k) uint64 array with k >= 1, "
                             f"got shape {words.shape} dtype {words.dtype}")
        self.layout = CodeLayout(words.shape[0], words.shape[1], self.hashes)
        # one trailing zero word: read_bits fetches a field's high part from the next word unconditionally
        self._words = np.zeros(words.size + 1, dtype=np.uint64)
        self._words[:-1] = words.reshape(-1)
        self.refresh_on_delete = bool(refresh_on_delete)
        self._refresh(np.arange(self.num_nodes))

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_csr(cls, indptr: np.ndarray, indices: np.ndarray, k: int, *, progress: bool = False,
                 **options: Any) -> "VENDCodes":
        """Codes for sorted, duplicate-free neighbour lists (row ``v`` = ``indices[indptr[v]:indptr[v+1]]``)."""
        layout = CodeLayout(np.asarray(indptr).size - 1, k, cls.hashes)
        return cls(cls._encode(layout, indptr, indices, progress), **options)

    @classmethod
    def _encode(cls, layout: CodeLayout, indptr: np.ndarray, indices: np.ndarray, progress: bool) -> np.ndarray:
        return encode_neighbors(layout, indptr, indices, bitmap=cls.bitmap, progress=progress)

    @classmethod
    def from_edges(cls, edges: Any, k: int, num_nodes: Optional[int] = None, *, progress: bool = False,
                   **options: Any) -> "VENDCodes":
        """Codes for the undirected view of an ``(E, 2)`` edge array (ids in ``[0, num_nodes)``)."""
        edges = as_edge_array(edges)
        if num_nodes is None:
            num_nodes = int(edges.max()) + 1 if edges.size else 1
        CodeLayout(num_nodes, k)  # K < 1 / too many vertices: fail before any work
        return cls.from_csr(*undirected_csr(edges, num_nodes), k, progress=progress, **options)

    @classmethod
    def from_graph(cls, graph: Any, k: int, *, progress: bool = False, **options: Any) -> "VENDCodes":
        """Codes for the undirected view of a :class:`~sgl.data.Graph` (edge directions ignored)."""
        CodeLayout(max(graph.num_nodes, 1), k)
        indptr, indices, _ = graph_csr(graph)
        return cls.from_csr(indptr, indices, k, progress=progress, **options)

    # -- properties -----------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return self.layout.num_nodes

    @property
    def k(self) -> int:
        return self.layout.k

    @property
    def words(self) -> np.ndarray:
        """The codes as a read-only ``(num_nodes, k)`` ``uint64`` view."""
        view = self._words[:-1].reshape(self.num_nodes, self.k).view()
        view.flags.writeable = False
        return view

    @property
    def nbytes(self) -> int:
        """Memory of the codes: ``8 K`` bytes per vertex."""
        return self._words[:-1].nbytes

    def kinds(self) -> Dict[str, int]:
        """How many vertices hold each kind of code (``exact``, ``full_hash``, ``left``, ``middle``, ``right``)."""
        rows = np.arange(self.num_nodes)
        exact = get_field(self._words, self.k, rows, 0, 1) == 1
        block = get_field(self._words, self.k, rows, 1, 2)[~exact]
        names = ("full_hash", "left", "middle", "right")
        return {"exact": int(exact.sum()), **{name: int((block == i).sum()) for i, name in enumerate(names)}}

    # -- queries --------------------------------------------------------------------------------
    def _decode(self, rows: np.ndarray) -> np.ndarray:
        """Header of each code in ``rows``: columns lo, hi (certified interval), first and last listed
        id, list length, list bit offset, bitmap bits (0 = none), bitmap hash functions."""
        lay, words = self.layout, self._words
        start = rows * self.k
        head = words[start]                       # flag, block type and sizes all sit in word 0
        exact = (head & _ONE) == _ONE
        block = ((head >> _ONE) & np.uint64(3)).astype(np.int64)
        count = np.where(exact, (head >> _ONE) & np.uint64((1 << lay.count_bits) - 1),
                         (head >> np.uint64(3)) & np.uint64((1 << lay.size_bits) - 1)).astype(np.int64)
        base = np.where(exact, lay.exact_base, lay.window_base)
        first = read_bits(words, start, base, lay.id_bits).astype(np.int64)
        last = read_bits(words, start, base + np.maximum(count - 1, 0) * lay.id_bits, lay.id_bits).astype(np.int64)
        lo = np.where(exact | (block == LEFT), 0, first)
        hi = np.where(exact | (block == RIGHT), self.num_nodes - 1, np.where(block == FULL_HASH, -1, last))
        buckets = np.where(exact, 0, lay.hash_bits(count)) if self.bitmap else np.zeros(rows.size, np.int64)
        hashes = np.ones(rows.size, np.int64)
        if lay.hash_count_bits:
            field = (head >> np.uint64(lay.hash_count_offset)) & np.uint64((1 << lay.hash_count_bits) - 1)
            hashes = np.where(exact, 1, field.astype(np.int64) + 1)
        return np.stack([lo, hi, first, last, count, base, buckets, hashes], axis=1)

    def _refresh(self, rows: np.ndarray) -> None:
        """Re-derive the header cache of ``rows`` from their words."""
        if not hasattr(self, "_head"):
            # the cache spares each query ~15 vectorised bit operations; it is derived data,
            # rebuilt from the words, and not counted in nbytes (a C decoder would not need it)
            small = max(self.num_nodes, self.layout.bits) < 2**31 - 1
            self._head = np.zeros((self.num_nodes, 8), dtype=np.int32 if small else np.int64)
        self._head[rows] = self._decode(rows)

    def _contains(self, start: np.ndarray, base: np.ndarray, count: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Whether ``y`` is in each code's sorted id list (``count`` ids from bit ``base``).

        A branch-free lower bound: ``pos`` (ids known to be ``< y``) grows by halving steps.
        """
        vb, words = self.layout.id_bits, self._words
        target = y.astype(np.uint64)
        pos = np.zeros(start.size, np.int64)
        offset = base.copy()                                   # bit offset of id number pos
        last = self.layout.bits - vb                           # probes past a list stay in the code
        # steps 2^j, ..., 2, 1 add up to 2^(j+1) - 1 >= the longest list
        step = 1 << max(max(self.layout.max_exact, self.layout.max_window).bit_length() - 1, 0)
        while step:
            probe = read_bits(words, start, np.minimum(offset + (step - 1) * vb, last), vb)
            take = (probe < target) & (pos + step <= count)
            np.add(pos, step, out=pos, where=take)
            np.add(offset, step * vb, out=offset, where=take)
            step >>= 1
        return (pos < count) & (read_bits(words, start, np.minimum(offset, last), vb) == target)

    def side(self, x: Any, y: Any) -> np.ndarray:
        """One-sided answers (``uint8`` :class:`PairType` values) of ``x``'s codes about ``y``."""
        x, y = as_pairs(x, y, self.num_nodes)
        return self._side(x, y)

    def _side(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        head = self._head[x]
        lo, hi, first, last, count = (head[:, i] for i in range(5))
        inside = (lo <= y) & (y <= hi)
        out = np.where(inside, _NON, _UNCERTAIN).astype(np.uint8)
        listed = inside & (count > 0)
        out[listed & ((y == first) | (y == last))] = _NEIGHBOR
        # only ids strictly between the first and last listed one need the binary search
        at = np.flatnonzero(listed & (first < y) & (y < last))
        if at.size:
            found = self._contains(x[at] * self.k, head[at, 5].astype(np.int64), count[at].astype(np.int64), y[at])
            out[at[found]] = _NEIGHBOR
        at = np.flatnonzero(~inside & (head[:, 6] > 0))
        i = 0
        while at.size:
            # hash function i of every code still uncertain that has more than i of them
            buckets = head[at, 6].astype(np.int64)
            bit = bitmap_slots(hash_keys(y[at]), buckets, i)
            offset = self.layout.bits - buckets + bit    # the bitmap fills the code's last H bits
            zero = read_bits(self._words, x[at] * self.k, offset, 1) == 0
            out[at[zero]] = _NON
            i += 1
            at = at[~zero & (head[at, 7] > i)]
        return out

    def test_batch(self, u: Any, v: Any) -> np.ndarray:
        """:class:`PairType` values (``uint8``) for the pairs ``(u[i], v[i])``, vectorised.

        The two sides are combined by ``min``; as no side of a sound code contradicts the
        other, ``v``'s side is only consulted where ``u``'s says ``Uncertain``.
        """
        u, v = as_pairs(u, v, self.num_nodes)
        out = self._side(u, v)
        ask = np.flatnonzero(out == _UNCERTAIN)
        if ask.size:
            out[ask] = self._side(v[ask], u[ask])
        return out

    def test(self, u: int, v: int) -> PairType:
        """``Neighbor``, ``NonNeighbor`` (certain) or ``Uncertain`` (ask the store) for one pair."""
        return PairType(int(self.test_batch([u], [v])[0]))

    # -- maintenance ----------------------------------------------------------------------------
    def stale_vertices(self, insert: Any = None, delete: Any = None) -> np.ndarray:
        """Vertices whose codes an update (``delete`` then ``insert``, ``(m, 2)`` each) invalidates."""
        insert = as_edge_array(insert if insert is not None else [], "insert")
        delete = as_edge_array(delete if delete is not None else [], "delete")
        pairs = np.concatenate([delete, insert])
        as_vertex_ids(pairs, self.num_nodes, "updated edges")
        n = self.num_nodes
        # an edge both deleted and re-inserted in one update is present afterwards
        deleted_back = np.isin(delete.min(1) * n + delete.max(1), insert.min(1) * n + insert.max(1))
        present = np.concatenate([deleted_back, np.ones(len(insert), dtype=bool)])
        x = np.concatenate([pairs[:, 0], pairs[:, 1]])
        y = np.concatenate([pairs[:, 1], pairs[:, 0]])
        present = np.concatenate([present, present])
        side = self._side(x, y)
        stale = (present & (side == _NON)) | (~present & (side == _NEIGHBOR))
        if self.refresh_on_delete:
            stale |= ~present & (side == _UNCERTAIN)
        return np.unique(x[stale])

    def encode(self, indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
        """Fresh ``(rows, k)`` codes for sorted neighbour lists, in this object's layout."""
        return self._encode(self.layout, np.asarray(indptr, dtype=np.int64), np.asarray(indices, dtype=np.int64),
                            False)

    def assign(self, vertices: Any, words: np.ndarray) -> None:
        """Replace the codes of ``vertices`` with ``words`` (``(len(vertices), k)`` ``uint64``)."""
        vertices = as_vertex_ids(vertices, self.num_nodes, "vertices")
        words = np.asarray(words, dtype=np.uint64).reshape(vertices.size, self.k)
        self._words[:-1].reshape(self.num_nodes, self.k)[vertices] = words
        self._refresh(vertices)

    def update(self, source: Any, insert: Any = None, delete: Any = None) -> np.ndarray:
        """Keep the codes sound after ``delete`` then ``insert`` of undirected edges.

        ``source`` must already hold the updated edges and answer ``neighbors_csr(vertices)``
        (an :class:`~sgl.analytics.vend.EdgeStore` or :class:`~sgl.analytics.vend.MemoryAdjacency`).
        Returns the re-encoded vertices.
        """
        stale = self.stale_vertices(insert, delete)
        if stale.size:
            self.assign(stale, self.encode(*source.neighbors_csr(stale)))
        return stale

    # -- files ----------------------------------------------------------------------------------
    def save(self, path: PathLike) -> None:
        """Write the codes to an ``.npz`` file atomically."""
        from sgl.fileio import atomic_write

        with atomic_write(path, "wb") as handle:
            np.savez(handle, words=self.words, kind=np.array(type(self).__name__), hashes=np.array(self.hashes))

    @classmethod
    def load(cls, path: PathLike, **options: Any) -> "VENDCodes":
        """Codes saved by :meth:`save` (a wrong or damaged file raises :class:`~sgl.errors.GraphError`)."""
        try:
            with np.load(path, allow_pickle=False) as data:
                words, kind = data["words"], str(data["kind"])
                # files written before the hash-count field all hold one-hash bitmaps
                hashes = str(data["hashes"]) if "hashes" in data.files else "one"
        except (OSError, ValueError, KeyError) as exc:
            raise GraphError(f"cannot read VEND codes from {os.fspath(path)}: {exc}") from exc
        if kind != cls.__name__:
            raise GraphError(f"{os.fspath(path)} holds {kind} codes, not {cls.__name__}")
        if cls.bitmap and hashes != cls.hashes:
            raise GraphError(f"{os.fspath(path)} holds {kind} codes with hashes={hashes!r} bitmaps (an older "
                             f"layout), not {cls.hashes!r}; rebuild them with {cls.__name__}.from_edges")
        return cls(words, **options)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_nodes={self.num_nodes}, k={self.k}, bits_per_vertex="
                f"{self.layout.bits}, max_exact={self.layout.max_exact})")


class OneHashVENDCodes(VENDCodes):
    """The paper's VEND code: windowed codes hash each neighbour to one bitmap bit, no hash-count field.

        >>> import numpy as np
        >>> OneHashVENDCodes.from_edges(np.array([[0, 1], [1, 2]]), k=1).test(0, 2).name
        'NonNeighbor'
    """

    hashes = "one"
