r"""Uniform neighbor sampling with per-layer fan-outs, vectorized over the CSR (numpy).

For every destination node ``v`` with in-degree ``d`` and fan-out ``k`` the sampler keeps
all ``d`` neighbours when ``d <= k`` and otherwise draws a uniform ``k``-subset of them.
The subset is drawn with Floyd's algorithm run *simultaneously for all rows*: ``k`` numpy
steps, each comparing one new draw with the at most ``k`` earlier draws of its row, so the
cost is ``O(rows * k^2)`` independent of the degree (a random-key sort would cost
``O(sum of degrees)``, which explodes on power-law hubs). With ``replace=True`` every row
gets exactly ``k`` independent draws (``d > 0``).

Sampled nodes are relabelled with a persistent ``num_nodes``-sized map that is reset after
every batch (``O(sampled)`` work, never ``O(num_nodes)``). Destination nodes come first
among each layer's source nodes, as DGL's blocks and PyG's ``NeighborLoader`` lay them out.

``fanouts[0]`` is the fan-out of the hop next to the seeds (PyG's ``num_neighbors`` order;
DGL's ``NeighborSampler`` takes the reverse list).

Example:
    >>> import torch
    >>> from sgl.data import Graph
    >>> from sgl.samplers import NeighborSampler
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 2, 3, 1, 2], [1, 0, 1, 1, 2, 3]]))
    >>> sampler = NeighborSampler(g, fanouts=[2, 2])
    >>> batch = sampler.sample(torch.tensor([1]), seed=0)
    >>> [b.size for b in batch.blocks][-1][1], batch.output_nodes.tolist()
    (1, [1])
    >>> int(batch.blocks[-1].edge_index.size(1))
    2
"""
from __future__ import annotations

from numbers import Integral
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from sgl.errors import ConfigError, GraphError
from sgl.samplers.block import Block, MiniBatch

__all__ = ["CSRAdjacency", "NeighborSampler", "sample_neighbors", "sample_neighbors_parallel", "check_fanouts"]

#: a hop with fewer sampled edges is drawn on the calling thread alone: handing chunks to a
#: helper costs more than it saves (the output is the same either way)
PARALLEL_MIN_EDGES = 16384


def check_fanouts(fanouts: Any) -> List[int]:
    """Validate fan-outs (a sequence or a ``"15,10"`` string) into a list of positive ints."""
    if isinstance(fanouts, str):
        try:
            fanouts = [int(t) for t in fanouts.split(",") if t.strip()]
        except ValueError as exc:
            raise ConfigError(f"fan-outs must be comma-separated integers like '15,10', got {fanouts!r}") from exc
    if isinstance(fanouts, (Integral,)):
        fanouts = [fanouts]
    try:
        values = list(fanouts)
    except TypeError as exc:
        raise ConfigError(f"fan-outs must be a list of positive integers, got {fanouts!r}") from exc
    if not values:
        raise ConfigError("fan-outs must name at least one layer, e.g. [15, 10]")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, Integral) or value <= 0:
            raise ConfigError(f"every fan-out must be a positive integer, got {values!r}; "
                              f"use e.g. [15, 10] (hop next to the seeds first)")
    return [int(v) for v in values]


class CSRAdjacency:
    """In-memory CSR over destinations: ``indices[indptr[v]:indptr[v+1]]`` are ``v``'s in-neighbours.

    The adjacency interface shared with the disk-backed store: ``indptr`` (numpy, in memory)
    and :meth:`gather` (neighbour ids at edge positions of the given rows).
    """

    def __init__(self, indptr: Any, indices: Any) -> None:
        self.indptr = np.ascontiguousarray(_numpy(indptr), dtype=np.int64)
        self.indices = np.ascontiguousarray(_numpy(indices))
        if self.indices.dtype.kind not in "iu":
            raise GraphError(f"indices must be integers, got {self.indices.dtype}")
        self.num_nodes = int(self.indptr.size - 1)

    @classmethod
    def from_graph(cls, graph: Any) -> "CSRAdjacency":
        return cls(graph.indptr, graph.indices)

    def degree(self, nodes: np.ndarray) -> np.ndarray:
        return self.indptr[nodes + 1] - self.indptr[nodes]

    def gather(self, rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Neighbour ids at absolute edge ``positions``; ``rows`` are the (unique) rows they fall in."""
        return self.indices[positions].astype(np.int64, copy=False)


def _numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _as_adjacency(graph: Any) -> Any:
    if hasattr(graph, "gather") and hasattr(graph, "indptr"):
        return graph
    if hasattr(graph, "indptr") and hasattr(graph, "indices"):
        return CSRAdjacency.from_graph(graph)
    raise GraphError(f"expected a Graph, a CSRAdjacency or a GraphStore, got {type(graph).__name__}")


def sample_neighbors(indptr: np.ndarray, nodes: np.ndarray, fanout: int, rng: np.random.Generator,
                     replace: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """Sample edge positions for each of ``nodes``.

    Returns ``(row, position)``: ``row[i]`` indexes ``nodes`` and ``position[i]`` is an absolute
    edge position into ``indices``. Rows keep all ``d <= fanout`` edges (in CSR order) or a
    uniform ``fanout``-subset (no duplicates); with ``replace`` exactly ``fanout`` draws per
    non-empty row.
    """
    start = indptr[nodes]
    deg = indptr[nodes + 1] - start
    n = nodes.size
    if replace:
        counts = np.where(deg > 0, fanout, 0)
        row = np.repeat(np.arange(n), counts)
        offset = (rng.random(row.size) * deg[row]).astype(np.int64)
        return row, start[row] + offset
    counts = np.minimum(deg, fanout)
    row = np.repeat(np.arange(n), counts)
    first = np.cumsum(counts) - counts
    offset = np.arange(row.size, dtype=np.int64) - np.repeat(first, counts)
    big = np.flatnonzero(deg > fanout)
    if big.size:
        # Floyd's algorithm over all rows at once: step i draws t in [0, d - k + i]; a draw
        # already taken by this row is replaced by d - k + i (never taken before), which
        # yields a uniform k-subset with exactly k draws and no rejection loop.
        d = deg[big]
        chosen = np.empty((big.size, fanout), dtype=np.int64)
        draws = rng.random((fanout, big.size))
        for i in range(fanout):
            j = d - fanout + i
            t = (draws[i] * (j + 1)).astype(np.int64)
            if i:
                taken = (chosen[:, :i] == t[:, None]).any(axis=1)
                t = np.where(taken, j, t)
            chosen[:, i] = t
        slots = first[big][:, None] + np.arange(fanout)
        offset[slots.ravel()] = chosen.ravel()
    return row, start[row] + offset


def parallel_hop_key(key: int, hop: int) -> int:
    """The counter key of hop ``hop`` of a parallel-path batch with key ``key``: every hop draws
    from its own streams (also used by :class:`sgl.samplers.DistNeighborSampler`)."""
    return (int(key) + int(hop) * 0x632BE59BD9B4E019) % 2**64


def _rows_of(first: np.ndarray, total: int) -> np.ndarray:
    """Each sampled edge's destination row, from the rows' first edge offsets and the edge total."""
    return np.repeat(np.arange(first.size), np.diff(np.append(first, total)))


def _unpruned(pruned_at: int, num_pruned: int, frontier_size: int) -> np.ndarray:
    """Positions of a frontier's nodes outside the pruned run ``[pruned_at, pruned_at + num_pruned)``."""
    return np.concatenate([np.arange(pruned_at), np.arange(pruned_at + num_pruned, frontier_size)])


def sample_neighbors_parallel(indptr: np.ndarray, nodes: np.ndarray, fanout: int, key: int,
                              replace: bool = False, threads: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`sample_neighbors` on ``threads`` threads (numba), same ``(row, position)`` layout.

    Row ``r`` draws from a counter-based stream of ``(key, nodes[r])``, so the output is a
    function of ``key`` and the node ids only: identical for any number of threads.
    """
    from sgl.samplers import _parallel_sampling as ps

    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    nodes = np.ascontiguousarray(nodes, dtype=np.int64)
    first = np.empty(nodes.size, dtype=np.int64)
    total = ps.hop_offsets(indptr, nodes, int(fanout), bool(replace), first)
    pos = np.empty(total, dtype=np.int64)
    ps.run_rows(ps.positions_rows, (indptr, nodes, first, int(fanout), bool(replace), np.uint64(key), pos),
                nodes.size, threads if total >= PARALLEL_MIN_EDGES else 1)
    row = _rows_of(first, total)
    return row, pos


class NeighborSampler:
    """Uniform multi-hop neighbor sampler producing per-layer :class:`Block` s.

    Args:
        graph: a :class:`sgl.data.Graph`, a :class:`CSRAdjacency` or a disk-backed
            :class:`sgl.samplers.GraphStore` (any object with ``indptr`` and ``gather``).
        fanouts: neighbours per hop, hop next to the seeds first (``[15, 10]``).
        replace: sample with replacement (exactly ``k`` draws per node).
        threads: ``None`` (default) samples with vectorised numpy on one thread; an integer
            runs the parallel numba path (:func:`sample_neighbors_parallel`) on that many
            threads, whose output for a seed is the same for every thread count (it differs
            from the numpy path's, which draws from one shared stream).

    :meth:`sample` is deterministic for a given ``seed`` (or numpy ``Generator`` state).
    """

    def __init__(self, graph: Any, fanouts: Union[Sequence[int], str], replace: bool = False,
                 threads: Optional[int] = None) -> None:
        self.adj = _as_adjacency(graph)
        self.fanouts = check_fanouts(fanouts)
        self.replace = bool(replace)
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, Integral) or threads < 1):
            raise ConfigError(f"threads must be a positive integer (or None for the numpy path), got {threads!r}")
        self.threads = None if threads is None else int(threads)
        self.num_nodes = int(self.adj.num_nodes)
        self._plain: Optional[np.ndarray] = None  # node -> local id or -1 (numpy path, seed checks)
        # parallel path: node -> (batch stamp << 32 | local id), valid only while the stamp is
        # the current batch's, so nothing is ever reset; and the batch's node ids
        self._stamped: Optional[np.ndarray] = None
        self._stamp = 0
        self._nodes = np.empty(0, dtype=np.int64)

    @property
    def _map(self) -> np.ndarray:
        """The numpy path's ``node -> local id`` map (-1 = unseen), reset after every batch."""
        if self._plain is None:
            self._plain = np.full(self.num_nodes, -1, dtype=np.int64)
        return self._plain

    @property
    def num_layers(self) -> int:
        return len(self.fanouts)

    def _check_seeds(self, seeds: Any, duplicates: bool = True) -> np.ndarray:
        seeds_np = np.asarray(_numpy(seeds)).reshape(-1)
        if seeds_np.dtype.kind not in "iu":
            raise GraphError(f"seed nodes must be integer ids, got dtype {seeds_np.dtype}")
        seeds_np = seeds_np.astype(np.int64, copy=False)
        if seeds_np.size == 0:
            raise GraphError("sample() needs at least one seed node")
        if seeds_np.min() < 0 or seeds_np.max() >= self.num_nodes:
            raise GraphError(f"seed ids must be in [0, {self.num_nodes}), got range "
                             f"[{int(seeds_np.min())}, {int(seeds_np.max())}]")
        if not duplicates:  # the caller checks them
            return seeds_np
        positions = np.arange(seeds_np.size)
        self._map[seeds_np] = positions
        duplicated = bool((self._map[seeds_np] != positions).any())
        self._map[seeds_np] = -1
        if duplicated:
            raise GraphError("seed nodes contain duplicates; pass each node once")
        return seeds_np

    def sample(self, seeds: Any, seed: Optional[int] = None, rng: Optional[np.random.Generator] = None,
               prune: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> MiniBatch:
        """Sample the computation graph of ``seeds``.

        ``prune(nodes) -> bool mask`` (optional) is called once with the new nodes of the
        first hop: masked nodes are placed last among ``blocks[-1]``'s sources and never
        expanded at any later hop, so their whole subtree is dropped (OUTRE's historical-embedding
        trick: a cached last-layer input stands in for it). With 3+ layers they stay (edgeless)
        destinations of the deeper blocks: where another node's sampled neighbours include
        one, its lower-layer representation is computed from its own features alone, as in
        OUTRE's pruning sampler.
        """
        seeds_np = self._check_seeds(seeds, duplicates=self.threads is None)
        rng = rng if rng is not None else np.random.default_rng(seed)
        if self.threads is not None:
            return self._sample_parallel(seeds_np, int(rng.integers(0, 2**63)), prune)
        mapping = self._map
        nodes = seeds_np
        mapping[nodes] = np.arange(nodes.size)
        blocks: List[Block] = []
        frontier_size = nodes.size
        pruned = np.empty(0, dtype=np.int64)
        pruned_at = 0  # pruned nodes sit at positions [pruned_at, pruned_at + pruned.size) of `nodes`
        last_inputs = None
        fresh = pruned
        try:
            for hop, fanout in enumerate(self.fanouts):
                frontier = nodes[:frontier_size]
                keep = None
                if hop >= 2 and pruned.size:
                    # a pruned node's subtree is dropped at every depth, not only at the next hop
                    keep = _unpruned(pruned_at, pruned.size, frontier_size)
                    frontier = frontier[keep]
                row, pos = sample_neighbors(self.adj.indptr, frontier, fanout, rng, self.replace)
                src = self.adj.gather(frontier, pos)
                if keep is not None:
                    row = keep[row]  # back to positions among all of this hop's destinations
                local = mapping[src]
                new_mask = local < 0
                if new_mask.any():
                    fresh = src[new_mask]
                    # O(n) dedup through the map: each id keeps one of its positions (whichever
                    # write lands last), and exactly that position survives the comparison
                    positions = np.arange(fresh.size)
                    mapping[fresh] = positions
                    uniq = fresh[mapping[fresh] == positions]
                    if hop == 0 and prune is not None and len(self.fanouts) > 1:
                        mask = np.asarray(prune(uniq), dtype=bool)
                        pruned = uniq[mask]
                        uniq = np.concatenate([uniq[~mask], pruned])
                        pruned_at = nodes.size + uniq.size - pruned.size
                    mapping[uniq] = np.arange(nodes.size, nodes.size + uniq.size)
                    nodes = np.concatenate([nodes, uniq])
                    local = mapping[src]
                edge_index = torch.from_numpy(np.stack([local, row]))
                blocks.append(Block(edge_index, int(nodes.size), int(frontier_size)))
                if hop == 0:
                    last_inputs = nodes
                frontier_size = nodes.size - (pruned.size if hop == 0 else 0)
        finally:
            mapping[fresh] = -1  # temporary positions, if a failure cut the hop short
            mapping[nodes] = -1
        blocks.reverse()
        return MiniBatch(n_id=torch.from_numpy(nodes), blocks=blocks, output_nodes=torch.from_numpy(seeds_np),
                         pruned=torch.from_numpy(pruned), last_input_nodes=torch.from_numpy(last_inputs))

    def _node_buffer(self, size: int, count: int) -> np.ndarray:
        """The persistent buffer of this batch's node ids, grown (keeping ``[:count]``) to ``size``."""
        size = min(size, self.num_nodes)
        if self._nodes.size < size:
            grown = np.empty(max(size, 2 * self._nodes.size), dtype=np.int64)
            grown[:count] = self._nodes[:count]
            self._nodes = grown
        return self._nodes

    def _sample_parallel(self, seeds: np.ndarray, key: int, prune: Optional[Callable[[np.ndarray], np.ndarray]]
                         ) -> MiniBatch:
        """:meth:`sample` through the numba kernels; see :mod:`sgl.samplers._parallel_sampling`.

        New nodes are numbered in order of first occurrence among the hop's sampled edges
        (row by row, in draw order); the draws are :func:`sample_neighbors_parallel`'s.
        """
        from sgl.samplers import _parallel_sampling as ps

        indptr = self.adj.indptr
        # an in-memory CSR gathers inside the draw kernel; a store keeps its own (I/O-counted) gather
        fused = isinstance(self.adj, CSRAdjacency)
        mapping, stamp = self._next_stamp()
        nodes = self._node_buffer(seeds.size, 0)
        count = ps.relabel(seeds.copy(), mapping, stamp, nodes, 0)
        if count != seeds.size:
            raise GraphError("seed nodes contain duplicates; pass each node once")
        blocks: List[Block] = []
        frontier_size, last_count = count, count
        pruned = np.empty(0, dtype=np.int64)
        pruned_at = 0
        for hop, fanout in enumerate(self.fanouts):
            frontier = nodes[:frontier_size]  # a view: relabel only appends past `count`
            keep = None
            if hop >= 2 and pruned.size:
                keep = _unpruned(pruned_at, pruned.size, frontier_size)
                frontier = frontier[keep]
            hop_key = np.uint64(parallel_hop_key(key, hop))
            first = np.empty(frontier.size, dtype=np.int64)
            total = ps.hop_offsets(indptr, frontier, fanout, self.replace, first)
            edge_index = np.empty((2, total), dtype=np.int64)
            threads = self.threads if total >= PARALLEL_MIN_EDGES else 1
            if fused:
                ps.run_rows(ps.draw_rows, (indptr, self.adj.indices, frontier, first, fanout, self.replace,
                                           hop_key, edge_index[0], edge_index[1]), frontier.size, threads)
            else:
                pos = np.empty(total, dtype=np.int64)
                ps.run_rows(ps.positions_rows, (indptr, frontier, first, fanout, self.replace, hop_key, pos),
                            frontier.size, threads)
                edge_index[0] = self.adj.gather(frontier, pos)
                edge_index[1] = _rows_of(first, total)
            if keep is not None:
                edge_index[1] = keep[edge_index[1]]  # back to positions among all of this hop's destinations
            nodes = self._node_buffer(count + total, count)
            before = count
            count = ps.relabel(edge_index[0], mapping, stamp, nodes, count)
            if hop == 0 and prune is not None and len(self.fanouts) > 1 and count > before:
                pruned, pruned_at = self._move_pruned_last(edge_index[0], nodes, before, count, prune, stamp)
            blocks.append(Block(torch.from_numpy(edge_index), int(count), int(frontier_size)))
            if hop == 0:
                last_count = count
            frontier_size = count - (pruned.size if hop == 0 else 0)
        blocks.reverse()
        n_id = nodes[:count].copy()
        return MiniBatch(n_id=torch.from_numpy(n_id), blocks=blocks, output_nodes=torch.from_numpy(seeds),
                         pruned=torch.from_numpy(pruned), last_input_nodes=torch.from_numpy(n_id[:last_count].copy()))

    def _next_stamp(self) -> Tuple[np.ndarray, int]:
        """The stamped map and a stamp no entry carries yet (every earlier batch's entries expire)."""
        if self._stamped is None:
            self._stamped = np.full(self.num_nodes, -1, dtype=np.int64)
        self._stamp += 1
        if self._stamp >= 2**31:  # stamp << 32 must stay a positive int64: start over once
            self._stamped.fill(-1)
            self._stamp = 1
        return self._stamped, self._stamp

    def _move_pruned_last(self, src: np.ndarray, nodes: np.ndarray, before: int, count: int,
                          prune: Callable[[np.ndarray], np.ndarray], stamp: int) -> Tuple[np.ndarray, int]:
        """Renumber the first hop's new nodes ``nodes[before:count]`` so the ones ``prune`` masks
        come last (relative order kept on both sides); ``src`` (local ids) is renumbered in place."""
        fresh = nodes[before:count].copy()
        mask = np.asarray(prune(fresh.copy()), dtype=bool)
        order = np.concatenate([np.flatnonzero(~mask), np.flatnonzero(mask)])
        inverse = np.empty(order.size, dtype=np.int64)
        inverse[order] = np.arange(before, count)
        new = src >= before
        src[new] = inverse[src[new] - before]
        nodes[before:count] = fresh[order]
        self._stamped[nodes[before:count]] = (stamp << 32) | np.arange(before, count)
        pruned = fresh[mask]
        return pruned, count - pruned.size

    def __repr__(self) -> str:
        threads = "" if self.threads is None else f", threads={self.threads}"
        return f"NeighborSampler(fanouts={self.fanouts}, replace={self.replace}, num_nodes={self.num_nodes}{threads})"
