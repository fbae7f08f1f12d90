r"""Exact motif counting with the vertices partitioned over the ranks of :mod:`sgl.comm`.

Every rank holds an arbitrary shard of the directed edges and owns a block of vertices
(:class:`~sgl.analytics.motifs.exchange.VertexPartition`). The count runs in five steps, each a
fixed sequence of collectives that every rank makes:

1. **Bi-directional tagging.** Each edge ``u -> v`` is sent to the owner of ``u`` as ``(u, v, OUT)``
   and to the owner of ``v`` as ``(v, u, IN)`` (undirected counting tags both ``BI``); the owner
   ORs the tags of a pair, so every owned vertex knows each neighbour's type ``OUT``, ``IN`` or
   ``BI`` however the edges were sharded and duplicated.
2. **Typed degrees.** Owners count each vertex's neighbours by type and answer the neighbours'
   degrees to whoever holds an edge to them.
3. **Reduced view.** Each vertex keeps only its neighbours *above* it in the order
   (degree, id): :math:`N^+(v)`. A triangle ``a < b < c`` is then seen exactly once, as the
   pair ``(b, c)`` of :math:`N^+(a)` closed by ``c ∈ N^+(b)``: the owner of ``a`` asks the owner
   of ``b`` whether ``(b, c)`` is an edge and of which type (in rounds of at most
   ``chunk_size`` questions), so no triangle is counted twice and no rank needs a remote
   neighbour list.
4. **Credits.** A found triangle's three tags give its closed motif (``M1`` .. ``M7``) and, at
   each corner, the pattern of the two incident types; the corners' owners receive one credit
   for the closed motif, one for "an adjacent pair of this pattern is centred here" and two
   for "an end of such a pair is here".
5. **Open motifs** come from degrees alone minus those credits: centred at ``v``,
   :math:`\binom{d_x}{2}` or :math:`d_x d_y` pairs of neighbour types ``x, y`` minus the closed
   ones; as an end, :math:`\sum_c (d_y(c) - [x{=}y])` over neighbours ``c`` seeing ``v`` as type
   ``x``, minus the closed ones.

Counts equal :func:`~sgl.analytics.motifs.count_motifs` exactly (tested on 2 Gloo processes).

Usage, inside each process of a :func:`sgl.comm.spawn` or ``torchrun`` job::

    local = distributed_count_motifs(my_edges, num_nodes, directed=True)   # owned vertices
    full = gather_counts(local)                                            # every vertex, every rank

In a single process (``sgl.comm`` not initialised) it is an ordinary count:

    >>> import numpy as np
    >>> edges = np.array([[0, 1, 2, 2], [1, 2, 0, 3]])            # a triangle and a tail
    >>> distributed_count_motifs(edges, 4).totals
    {'edge': 4, 'wedge': 2, 'triangle': 1}
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np
import torch

import sgl.comm as comm
from sgl._checks import check_bool, check_int
from sgl.analytics.motifs.catalog import (BI, CLOSED_MOTIFS, DIRECTED_MOTIFS, IN, OPEN_MOTIFS, OUT, TYPES,
                                          UNDIRECTED_MOTIFS, closed_motif, open_motif)
from sgl.analytics.motifs.exchange import VertexPartition, ask, lookup, route
from sgl.analytics.motifs.result import MotifCounts
from sgl.errors import ConfigError, GraphError

__all__ = ["distributed_count_motifs", "gather_counts"]

_FLIP = np.array([0, IN, OUT, BI], dtype=np.int64)  # indexed by type
_CLOSED = np.full((4, 4, 4), -1, dtype=np.int64)
_OPEN = np.full((4, 4), -1, dtype=np.int64)
for _x in TYPES:
    for _y in TYPES:
        _OPEN[_x, _y] = OPEN_MOTIFS.index(open_motif(_x, _y))
        for _z in TYPES:
            _CLOSED[_x, _y, _z] = CLOSED_MOTIFS.index(closed_motif(_x, _y, _z))
_NC, _NO = len(CLOSED_MOTIFS), len(OPEN_MOTIFS)
_CREDITS = _NC + 2 * _NO  # per vertex: closed motifs | adjacent centred pairs | ends of adjacent pairs


def _as_edges(edges: Any, num_nodes: int) -> np.ndarray:
    array = edges.numpy() if isinstance(edges, torch.Tensor) else np.asarray(edges)
    if array.ndim != 2 or array.shape[0] != 2:
        raise GraphError(f"edges must be a [2, num_edges] array (sources; destinations), got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise GraphError(f"edges must hold integer vertex ids, got dtype {array.dtype}")
    array = array.astype(np.int64)
    if array.size and (array.min() < 0 or array.max() >= num_nodes):
        raise GraphError(f"edges have vertex ids in [{array.min()}, {array.max()}] but num_nodes={num_nodes}; "
                         f"ids must be in [0, num_nodes)")
    return array[:, array[0] != array[1]]


def _tagged_neighbours(edges: np.ndarray, part: VertexPartition, directed: bool, timeout: Optional[float]):
    """Step 1: every owned vertex's distinct neighbours with their OR-ed types (CSR over the block)."""
    u, v = edges
    out_tag, in_tag = (OUT, IN) if directed else (BI, BI)
    messages = np.concatenate([np.stack([u, v, np.full(u.size, out_tag)], 1),
                               np.stack([v, u, np.full(u.size, in_tag)], 1)])
    got = route(messages, part, timeout)
    keys = part.local(got[:, 0]) * part.num_nodes + got[:, 1]
    order = np.argsort(keys, kind="stable")
    keys, tags = keys[order], got[order, 2]
    if keys.size:
        first = np.concatenate([[True], keys[1:] != keys[:-1]])
        starts = np.flatnonzero(first)
        keys, tags = keys[starts], np.bitwise_or.reduceat(tags, starts)
    rows = keys // part.num_nodes
    indptr = np.zeros(part.num_local + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=part.num_local), out=indptr[1:])
    return indptr, keys - rows * part.num_nodes, tags


def _pairs(indptr: np.ndarray, lo: int, hi: int) -> Tuple[np.ndarray, np.ndarray]:
    """Positions ``(p, q)``, ``p < q``, of every pair within each CSR row ``lo <= row < hi``."""
    entries = np.arange(indptr[lo], indptr[hi])
    rows_end = np.repeat(indptr[lo + 1:hi + 1], np.diff(indptr[lo:hi + 1]))
    later = rows_end - entries - 1
    first = np.repeat(entries, later)
    offset = np.arange(first.size) - np.repeat(np.cumsum(later) - later, later)
    return first, first + 1 + offset


def _rounds(pairs_per_row: np.ndarray, chunk_size: int) -> np.ndarray:
    """Row boundaries cutting the rows into chunks of about ``chunk_size`` pairs."""
    cumulative = np.concatenate([[0], np.cumsum(pairs_per_row)])
    marks = np.arange(chunk_size, cumulative[-1], chunk_size)
    return np.unique(np.concatenate([[0], np.searchsorted(cumulative, marks, side="right") - 1,
                                     [pairs_per_row.size]]))


def distributed_count_motifs(edges: Any, num_nodes: int, directed: bool = False, chunk_size: int = 1 << 20,
                             timeout: Optional[float] = None, progress: bool = False) -> MotifCounts:
    """Motif counts of the vertices this rank owns, from this rank's shard of the edges.

    Args:
        edges: ``[2, E_r]`` (sources; destinations) edges held by this rank (any shard: the
            union over the ranks is the graph; duplicates and self-loops are ignored).
        num_nodes: vertices of the whole graph (the same on every rank).
        directed: count ``M1`` .. ``M13`` instead of edges, wedges and triangles.
        chunk_size: wedge questions per round and rank (bounds the memory of step 3).
        timeout: seconds for each collective (default: the process group's).
        progress: a progress bar over the rounds on rank 0.

    Returns:
        :class:`MotifCounts` with ``vertices`` = this rank's block and ``totals`` of the whole graph.
    """
    num_nodes = check_int(num_nodes, "num_nodes", minimum=1, error=GraphError)
    check_bool(directed, "directed")
    chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
    rank, world = comm.get_rank(), comm.get_world_size()
    agreed = comm.all_gather(torch.tensor([num_nodes, int(directed)]), timeout=timeout) if world > 1 else []
    if any(a.tolist() != [num_nodes, int(directed)] for a in agreed):
        raise ConfigError(f"every rank must pass the same num_nodes and directed; got "
                          f"{[a.tolist() for a in agreed]} as [num_nodes, directed] by rank")
    part = VertexPartition(num_nodes, world, rank)
    indptr, nbr, tag = _tagged_neighbours(_as_edges(edges, num_nodes), part, directed, timeout)
    # step 2: typed degrees of owned vertices, then of every neighbour
    row = np.repeat(np.arange(part.num_local), np.diff(indptr))
    typed = np.zeros((part.num_local, 4), dtype=np.int64)
    np.add.at(typed, (row, tag), 1)
    typed[:, 0] = typed[:, 1:].sum(1)  # column 0 = total degree
    nbr_typed = lookup(nbr, typed, part, timeout)
    own_rank = typed[row, 0] * num_nodes + (row + part.lo)
    up = nbr_typed[:, 0] * num_nodes + nbr > own_rank
    # step 3: the reduced view, each list sorted by (degree, id)
    order = np.lexsort((nbr_typed[up, 0] * num_nodes + nbr[up], row[up]))
    up_nbr, up_tag = nbr[up][order], tag[up][order]
    up_ptr = np.zeros(part.num_local + 1, dtype=np.int64)
    np.cumsum(np.bincount(row[up], minlength=part.num_local), out=up_ptr[1:])
    up_keys = np.repeat(np.arange(part.num_local), np.diff(up_ptr)) * num_nodes + up_nbr
    key_order = np.argsort(up_keys)
    sorted_keys, sorted_tags = up_keys[key_order], up_tag[key_order]

    def edge_tag(question: np.ndarray) -> np.ndarray:
        keys = part.local(question[:, 0]) * num_nodes + question[:, 1]
        pos = np.searchsorted(sorted_keys, keys).clip(max=max(sorted_keys.size - 1, 0))
        hit = sorted_keys[pos] == keys if sorted_keys.size else np.zeros(keys.size, dtype=bool)
        return np.where(hit, sorted_tags[pos] if sorted_keys.size else 0, 0).reshape(-1, 1)

    d_up = np.diff(up_ptr)
    bounds = _rounds(d_up * (d_up - 1) // 2, chunk_size)
    local_rounds = bounds.size - 1
    rounds = int(comm.all_reduce(torch.tensor([local_rounds]), op="max", timeout=timeout)) if world > 1 else local_rounds
    credits = np.zeros(part.num_local * _CREDITS, dtype=np.int64)
    closed_found = np.zeros(_NC, dtype=np.int64)
    from tqdm.auto import tqdm

    for step in tqdm(range(rounds), desc="wedge rounds", disable=not progress or rank != 0, leave=False):
        lo, hi = (bounds[step], bounds[step + 1]) if step < local_rounds else (0, 0)
        p, q = _pairs(up_ptr, lo, hi)
        b, c = up_nbr[p], up_nbr[q]
        t_bc = ask(np.stack([b, c], 1), part.owner(b), edge_tag, part, timeout)[:, 0]
        closed = t_bc > 0
        a = np.searchsorted(up_ptr, p[closed], side="right") - 1 + part.lo
        b, c, t_ab, t_ac, t_bc = b[closed], c[closed], up_tag[p[closed]], up_tag[q[closed]], t_bc[closed]
        kind = _CLOSED[t_ab, t_ac, t_bc]
        closed_found += np.bincount(kind, minlength=_NC)
        pattern = [_OPEN[t_ab, t_ac], _OPEN[_FLIP[t_ab], t_bc], _OPEN[_FLIP[t_ac], _FLIP[t_bc]]]
        corners = [a, b, c]
        codes = []
        for i, vertex in enumerate(corners):
            codes += [vertex * _CREDITS + kind, vertex * _CREDITS + _NC + pattern[i]]
            codes += [vertex * _CREDITS + _NC + _NO + pattern[j] for j in range(3) if j != i]
        codes = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)
        got = route(np.stack([codes // _CREDITS, codes % _CREDITS], 1), part, timeout)
        np.add.at(credits, part.local(got[:, 0]) * _CREDITS + got[:, 1], 1)
    credits = credits.reshape(part.num_local, _CREDITS)
    return _assemble(part, typed, row, tag, nbr_typed, credits, closed_found, directed, timeout)


def _assemble(part, typed, row, tag, nbr_typed, credits, closed_found, directed, timeout) -> MotifCounts:
    """Step 5: open motifs from typed degrees minus the closed credits; totals by all-reduce."""
    n_local = part.num_local
    centre = np.zeros((n_local, _NO), dtype=np.int64)
    for x in TYPES:
        for y in TYPES:
            if x <= y:
                pairs = typed[:, x] * (typed[:, x] - 1) // 2 if x == y else typed[:, x] * typed[:, y]
                centre[:, _OPEN[x, y]] += pairs
    centre -= credits[:, _NC:_NC + _NO]
    end = np.zeros(n_local * _NO, dtype=np.int64)
    seen_as = _FLIP[tag]  # the type of this vertex seen from each neighbour
    for y in TYPES:
        np.add.at(end, row * _NO + _OPEN[seen_as, y], nbr_typed[:, y] - (seen_as == y))
    end = end.reshape(n_local, _NO) - credits[:, _NC + _NO:]
    local_totals = np.concatenate([closed_found, centre.sum(0), [typed[:, OUT].sum(), typed[:, BI].sum()]])
    totals = comm.all_reduce(comm.to_wire(torch.from_numpy(local_totals)), timeout=timeout).cpu().numpy() \
        if comm.is_initialized() else local_totals
    closed, opened = credits[:, :_NC], centre + end
    if directed:
        columns = np.column_stack([typed[:, OUT] + typed[:, IN], typed[:, BI], closed, opened])
        values = list(totals[_NC + _NO:]) + list(totals[:_NC + _NO])
        values[1] //= 2
        names = DIRECTED_MOTIFS
    else:
        m4, m13 = CLOSED_MOTIFS.index("M4"), OPEN_MOTIFS.index("M13")
        columns = np.column_stack([typed[:, BI], opened[:, m13], closed[:, m4]])
        values = [totals[-1] // 2, totals[_NC + m13], totals[m4]]
        names = UNDIRECTED_MOTIFS
    return MotifCounts(names, columns, dict(zip(names, map(int, values))), directed,
                       vertices=np.arange(part.lo, part.hi, dtype=np.int64))


def gather_counts(local: MotifCounts, timeout: Optional[float] = None) -> MotifCounts:
    """Every rank's rows of :func:`distributed_count_motifs`, in vertex order, on every rank."""
    if not comm.is_initialized():
        return local
    rows = comm.all_gather(comm.to_wire(torch.from_numpy(np.column_stack([local.vertices, local.per_vertex]))),
                           timeout=timeout)
    table = torch.cat(rows).cpu().numpy()
    table = table[np.argsort(table[:, 0], kind="stable")]
    return MotifCounts(local.names, table[:, 1:], local.totals, local.directed, vertices=table[:, 0])
