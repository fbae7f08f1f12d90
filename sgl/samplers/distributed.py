r"""Distributed neighbour sampling over a partitioned graph (DistDGL / GraphLearn-for-PyTorch style).

Each rank holds a :class:`~sgl.samplers.DistGraph` (its nodes' CSR rows and feature rows plus
the partition book) and samples the computation graphs of its own seed nodes. At every hop the
frontier nodes owned by other ranks are sent to their owners in one :func:`sgl.comm.all_to_all`;
each owner draws their neighbours and sends the sampled lists back in a second one. After the
last hop the features of the input nodes (and, for routed seeds, the labels) are fetched from
their owners the same way. :meth:`DistNeighborSampler.sample` is therefore a *collective*: every
rank calls it the same number of times (with empty seeds when it has none left), and it returns
the same :class:`~sgl.samplers.MiniBatch` a single-process sampler does, with ``x`` and ``y`` set.

**Identical to the single-process sampler.** The draws come from the counter-based kernel of
:class:`~sgl.samplers.NeighborSampler`'s parallel path: node ``v`` at hop ``h`` of a batch with
key ``k`` draws from the stream ``(hop_key(k, h), v, i)`` and its degree only, never from a
shared sequential generator, so it does not matter which process draws it. Rows are assembled
in frontier order and new nodes numbered in order of first occurrence, as that path does; so
for the same seeds and ``seed`` (or generator state) a rank's batch equals
``NeighborSampler(graph, fanouts, threads=1).sample(seeds, seed=seed)`` bit for bit (any
``threads``; the default numpy path, ``threads=None``, draws from one sequential stream and
differs). Pruning (OUTRE's ``prune=``) is not offered.

**Traffic.** :attr:`DistNeighborSampler.traffic` counts the nodes sampled remotely, the payload
bytes of this rank's requests to *other* ranks and of their answers (what it fetched), and the
bytes it served to others' requests (the split-size handshake of :func:`sgl.comm.all_to_all`,
a few bytes per peer, is not counted).

**Devices.** Sampling runs on the host (numba kernels); feature rows stay on the device of the
part's ``x`` and are fetched there. Under NCCL every payload is staged on the current CUDA device.

**Failures.** Every exchange runs under :mod:`sgl.comm`'s timeout (``timeout``, default: the one
given to :func:`sgl.comm.init`); a peer that died or stopped sampling makes the others raise
:class:`~sgl.errors.CommError` saying so. Bad seeds raise :class:`~sgl.errors.GraphError` before
any communication.

Example (one process: every exchange is local; under ``torchrun`` the same code samples
across ranks):
    >>> import sgl, torch
    >>> from sgl.samplers import DistGraph, DistNeighborSampler, NeighborSampler
    >>> g = sgl.datasets.load("karate")
    >>> sampler = DistNeighborSampler(DistGraph.from_graph(g), fanouts=[3, 2])
    >>> batch = sampler.sample(torch.tensor([0, 5, 33]), seed=4)
    >>> ref = NeighborSampler(g, [3, 2], threads=1).sample(torch.tensor([0, 5, 33]), seed=4)
    >>> torch.equal(batch.n_id, ref.n_id), torch.equal(batch.blocks[0].edge_index, ref.blocks[0].edge_index)
    (True, True)
    >>> torch.equal(batch.x, g.x[batch.n_id]), batch.y.tolist() == g.y[[0, 5, 33]].tolist()
    (True, True)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from numbers import Integral
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from sgl import comm
from sgl.errors import CommError, ConfigError, GraphError
from sgl.samplers.block import Block, MiniBatch
from sgl.samplers.dist_graph import DistGraph
from sgl.samplers.neighbor import PARALLEL_MIN_EDGES, check_fanouts, parallel_hop_key

__all__ = ["DistNeighborSampler", "SamplerTraffic"]

_EMPTY = torch.empty(0, dtype=torch.int64)


@dataclass
class SamplerTraffic:
    """What a :class:`DistNeighborSampler` exchanged with other ranks (cumulative; :meth:`reset`).

    ``*_sent`` are this rank's requests (node ids; a sampling request also carries the 8-byte
    batch key), ``*_received`` the answers to them; ``served_bytes`` the answers it sent to
    other ranks' requests.
    """

    #: frontier nodes whose neighbours their (remote) owner sampled for us
    remote_sampled_nodes: int = 0
    sample_bytes_sent: int = 0
    #: per-row counts plus sampled neighbour ids, 8 bytes each
    sample_bytes_received: int = 0
    #: input-node feature rows (and routed labels) read locally / fetched from other ranks
    local_feature_rows: int = 0
    remote_feature_rows: int = 0
    feature_bytes_sent: int = 0
    feature_bytes_received: int = 0
    served_bytes: int = 0

    @property
    def bytes_fetched(self) -> int:
        """Bytes received for this rank's requests: sampled neighbour lists plus feature rows."""
        return self.sample_bytes_received + self.feature_bytes_received

    @property
    def bytes_sent(self) -> int:
        """Bytes this rank sent: its requests plus its answers to others."""
        return self.sample_bytes_sent + self.feature_bytes_sent + self.served_bytes

    def as_dict(self) -> Dict[str, int]:
        return dict(asdict(self), bytes_fetched=self.bytes_fetched, bytes_sent=self.bytes_sent)

    def reset(self) -> None:
        for name in asdict(self):
            setattr(self, name, 0)


def _nbytes(tensors: Sequence[torch.Tensor], skip: int) -> int:
    return sum(t.numel() * t.element_size() for i, t in enumerate(tensors) if i != skip)


def _relabel(nodes: np.ndarray, src: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Append ``src``'s unseen ids to ``nodes`` in order of first occurrence; ``src`` as local ids.

    ``O((|nodes| + |src|) log)`` and no ``num_nodes``-sized map. The ``nodes`` (unique) are the
    first occurrences of themselves, so they keep their positions.
    """
    uniq, first, inverse = np.unique(np.concatenate([nodes, src]), return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    new_id = np.empty(order.size, dtype=np.int64)
    new_id[order] = np.arange(order.size)
    return uniq[order], new_id[inverse.reshape(-1)[nodes.size:]]


class DistNeighborSampler:
    """Uniform multi-hop neighbour sampling across the ranks of a partitioned graph.

    Args:
        graph: this rank's :class:`~sgl.samplers.DistGraph` (one part per process).
        fanouts: neighbours per hop, hop next to the seeds first (``[15, 10]``).
        replace: sample with replacement (exactly ``k`` draws per non-isolated node).
        threads: threads drawing this rank's rows (the output does not depend on it).
        fetch_features: attach ``x`` (input-node features, fetched from their owners) and ``y``
            (seed labels) to every batch, when the graph has them.
        owned_seeds: seeds must be nodes this rank owns (DistDGL's rule: each trainer takes
            its partition's training nodes); ``False`` accepts any global ids and routes them
            like any frontier node (their labels are then fetched too).
        timeout: seconds each exchange may wait (``None``: :func:`sgl.comm.init`'s).
    """

    def __init__(self, graph: DistGraph, fanouts: Union[Sequence[int], str], replace: bool = False, threads: int = 1,
                 fetch_features: bool = True, owned_seeds: bool = True, timeout: Optional[float] = None) -> None:
        if not isinstance(graph, DistGraph):
            raise ConfigError(f"DistNeighborSampler needs a DistGraph (DistGraph.from_graph(graph)), "
                              f"got {type(graph).__name__}")
        world, rank = comm.get_world_size(), comm.get_rank()
        if graph.num_parts != world or graph.rank != rank:
            raise ConfigError(f"the DistGraph is part {graph.rank} of {graph.num_parts} but this process is rank "
                              f"{rank} of {world}; build it with DistGraph.from_graph(graph) in every process "
                              f"(one part per process)")
        if isinstance(threads, bool) or not isinstance(threads, Integral) or threads < 1:
            raise ConfigError(f"threads must be a positive integer, got {threads!r}")
        self.graph, self.fanouts = graph, check_fanouts(fanouts)
        self.replace, self.threads = bool(replace), int(threads)
        self.fetch_features, self.owned_seeds, self.timeout = bool(fetch_features), bool(owned_seeds), timeout
        self.rank, self.world = rank, world
        # sampling runs on the host; NCCL moves only CUDA tensors, so payloads are staged there
        self._wire = (torch.device("cuda", torch.cuda.current_device()) if comm.get_backend() == "nccl"
                      else torch.device("cpu"))
        self.traffic = SamplerTraffic()

    @property
    def num_layers(self) -> int:
        return len(self.fanouts)

    # ------------------------------------------------------------------ exchanges
    def _exchange(self, parts: List[torch.Tensor], what: str, counter: str,
                  output_splits: Optional[List[int]] = None) -> List[torch.Tensor]:
        """One all_to_all (``parts[p]`` goes to rank ``p``); a request exchange (``counter`` =
        ``"sample"`` / ``"feature"``) counts what we sent as ``<counter>_bytes_sent``, a reply
        exchange (``"<counter>_reply"``) what we sent as served and what we got as received."""
        try:
            got = comm.all_to_all([t.to(self._wire) for t in parts], output_splits=output_splits, timeout=self.timeout)
        except CommError as exc:
            raise CommError(
                f"DistNeighborSampler on rank {self.rank} of {self.world}: the {what} exchange failed; a peer "
                f"rank died or stopped sampling (every rank must call sample() equally often, with empty seeds "
                f"when it has none left). Cause: {exc}") from exc
        t, stage = self.traffic, counter.split("_")[0]
        if counter.endswith("_reply"):
            t.served_bytes += _nbytes(parts, self.rank)
            setattr(t, f"{stage}_bytes_received", getattr(t, f"{stage}_bytes_received") + _nbytes(got, self.rank))
        else:
            setattr(t, f"{stage}_bytes_sent", getattr(t, f"{stage}_bytes_sent") + _nbytes(parts, self.rank))
        return got

    def _by_owner(self, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Positions of ``ids`` grouped by owner (stable) and the group bounds."""
        owner = self.graph.book.owner[ids]
        order = np.argsort(owner, kind="stable")
        return order, np.searchsorted(owner[order], np.arange(self.world + 1))

    def _draw(self, ids: np.ndarray, fanout: int, key: int) -> Tuple[np.ndarray, np.ndarray]:
        """Sample owned nodes ``ids``: per-row counts and the sampled (global) neighbour ids."""
        from sgl.samplers import _parallel_sampling as ps

        g = self.graph
        if ids.size and bool((g.book.owner[ids] != self.rank).any()):
            raise CommError(f"rank {self.rank} was asked to sample nodes it does not own; the ranks hold "
                            f"different partition books (build every DistGraph from the same partition)")
        rows = np.ascontiguousarray(g.book.local[ids])
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        first = np.empty(ids.size, dtype=np.int64)
        total = ps.hop_offsets(g.indptr, rows, fanout, self.replace, first)
        pos = np.empty(total, dtype=np.int64)
        ps.run_rows(ps.positions_rows_at, (g.indptr, rows, ids, first, fanout, self.replace, np.uint64(key), pos),
                    ids.size, self.threads if total >= PARALLEL_MIN_EDGES else 1)
        return np.diff(np.append(first, total)), g.indices[pos]

    def _hop(self, frontier: np.ndarray, fanout: int, key: int, hop: int) -> Tuple[np.ndarray, np.ndarray]:
        """One hop over the ranks: ``(src, dst)`` of the frontier's sampled edges, global ``src``
        and ``dst`` = frontier position, rows in frontier order (as the single-process path)."""
        order, bounds = self._by_owner(frontier)
        groups = [order[bounds[p]:bounds[p + 1]] for p in range(self.world)]
        header = torch.from_numpy(np.array([key], dtype=np.uint64).view(np.int64))
        requests = [_EMPTY if p == self.rank or not g.size else torch.cat([header, torch.from_numpy(frontier[g])])
                    for p, g in enumerate(groups)]
        self.traffic.remote_sampled_nodes += int(frontier.size - groups[self.rank].size)
        asked = self._exchange(requests, f"hop {hop} neighbour request", "sample")
        replies = []
        for msg in asked:
            if not msg.numel():
                replies.append(_EMPTY)
                continue
            msg = msg.cpu().numpy()
            counts, src = self._draw(msg[1:], fanout, int(msg[:1].view(np.uint64)[0]))
            replies.append(torch.from_numpy(np.concatenate([counts, src])))
        answers = self._exchange(replies, f"hop {hop} neighbour reply", "sample_reply")
        counts = np.zeros(frontier.size, dtype=np.int64)
        drawn = []
        for p, positions in enumerate(groups):
            if not positions.size:
                continue
            if p == self.rank:
                c, s = self._draw(frontier[positions], fanout, key)
            else:
                reply = answers[p].cpu().numpy()
                c, s = reply[:positions.size], reply[positions.size:]
                if c.size != positions.size or s.size != int(c.sum()):
                    raise CommError(f"rank {p} answered {reply.size} values for {positions.size} nodes; "
                                    f"the ranks run different samplers (fan-outs, replace)")
            counts[positions] = c
            drawn.append((positions, c, s))
        first = np.cumsum(counts) - counts
        src = np.empty(int(counts.sum()), dtype=np.int64)
        for positions, c, s in drawn:  # each group's edges go to its rows' slots, in draw order
            src[np.repeat(first[positions] - (np.cumsum(c) - c), c) + np.arange(s.size)] = s
        return src, np.repeat(np.arange(frontier.size), counts)

    def fetch(self, ids: Any, what: str = "x") -> torch.Tensor:
        """Rows of ``what`` (``"x"`` or ``"y"``) for global node ``ids``, read from their owners.

        A collective, like :meth:`sample`: every rank calls it (with empty ``ids`` when it needs nothing).
        """
        table = getattr(self.graph, what) if what in ("x", "y") else None
        if table is None:
            raise GraphError(f"the DistGraph has no {what!r} rows to fetch" if what in ("x", "y")
                             else f"fetch() reads 'x' or 'y', got {what!r}")
        ids = np.asarray(ids.numpy() if isinstance(ids, torch.Tensor) else ids).reshape(-1)
        if ids.size and (ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= self.graph.num_nodes):
            raise GraphError(f"fetch() needs global node ids in [0, {self.graph.num_nodes}), got {ids[:8].tolist()}...")
        ids = ids.astype(np.int64, copy=False)
        local = self.graph.book.local
        order, bounds = self._by_owner(ids)
        groups = [order[bounds[p]:bounds[p + 1]] for p in range(self.world)]
        requests = [_EMPTY if p == self.rank else torch.from_numpy(ids[g]) for p, g in enumerate(groups)]
        asked = self._exchange(requests, f"{what} request", "feature")
        replies = [table[torch.from_numpy(local[m.cpu().numpy()]).to(table.device)] for m in asked]
        answers = self._exchange(replies, f"{what} reply", "feature_reply",
                                 output_splits=[0 if p == self.rank else int(g.size) for p, g in enumerate(groups)])
        out = table.new_empty((ids.size,) + tuple(table.shape[1:]))
        for p, positions in enumerate(groups):
            index = torch.from_numpy(positions).to(table.device)
            out[index] = (table[torch.from_numpy(local[ids[positions]]).to(table.device)] if p == self.rank
                          else answers[p].to(table.device))
        mine = int(groups[self.rank].size)
        self.traffic.local_feature_rows += mine
        self.traffic.remote_feature_rows += int(ids.size) - mine
        return out

    # ------------------------------------------------------------------ sampling
    def _check_seeds(self, seeds: Any) -> np.ndarray:
        seeds_np = np.asarray(seeds.detach().cpu().numpy() if isinstance(seeds, torch.Tensor) else seeds).reshape(-1)
        if seeds_np.size == 0:
            return np.empty(0, dtype=np.int64)
        if seeds_np.dtype.kind not in "iu":
            raise GraphError(f"seed nodes must be integer ids, got dtype {seeds_np.dtype}")
        seeds_np = seeds_np.astype(np.int64, copy=False)
        n = self.graph.num_nodes
        if seeds_np.min() < 0 or seeds_np.max() >= n:
            raise GraphError(f"seed ids must be global ids in [0, {n}), got range "
                             f"[{int(seeds_np.min())}, {int(seeds_np.max())}]")
        if np.unique(seeds_np).size != seeds_np.size:
            raise GraphError("seed nodes contain duplicates; pass each node once")
        if self.owned_seeds:
            owner = self.graph.book.owner[seeds_np]
            foreign = np.flatnonzero(owner != self.rank)
            if foreign.size:
                raise GraphError(
                    f"rank {self.rank} got {foreign.size} seed node(s) it does not own (e.g. node "
                    f"{int(seeds_np[foreign[0]])}, owned by rank {int(owner[foreign[0]])}); give each rank the "
                    f"seeds of its own part (DistGraph.split_nodes('train')), or build the sampler with "
                    f"owned_seeds=False to route seeds to their owners")
        return seeds_np

    def sample(self, seeds: Any, seed: Optional[int] = None, rng: Optional[np.random.Generator] = None) -> MiniBatch:
        """Sample the computation graph of ``seeds`` (global ids; empty is allowed). Collective.

        The batch key is drawn as :class:`~sgl.samplers.NeighborSampler` draws it
        (``rng.integers(0, 2**63)`` from ``rng`` or ``numpy.random.default_rng(seed)``).
        """
        seeds_np = self._check_seeds(seeds)
        rng = rng if rng is not None else np.random.default_rng(seed)
        key = int(rng.integers(0, 2**63))
        nodes, frontier_size, last_count = seeds_np, seeds_np.size, seeds_np.size
        blocks: List[Block] = []
        for hop, fanout in enumerate(self.fanouts):
            src, dst = self._hop(nodes[:frontier_size], fanout, parallel_hop_key(key, hop), hop)
            nodes, local = _relabel(nodes, src)
            blocks.append(Block(torch.from_numpy(np.stack([local, dst])), int(nodes.size), int(frontier_size)))
            if hop == 0:
                last_count = nodes.size
            frontier_size = nodes.size
        blocks.reverse()
        n_id = torch.from_numpy(nodes)
        batch = MiniBatch(n_id=n_id, blocks=blocks, output_nodes=torch.from_numpy(seeds_np),
                          last_input_nodes=n_id[:last_count].clone())
        if self.fetch_features and self.graph.x is not None:
            batch.x = self.fetch(nodes, "x")
        if self.fetch_features and self.graph.y is not None:
            if self.owned_seeds:
                batch.y = self.graph.y[torch.from_numpy(self.graph.book.local[seeds_np]).to(self.graph.y.device)]
            else:
                batch.y = self.fetch(seeds_np, "y")
        return batch

    def __repr__(self) -> str:
        return (f"DistNeighborSampler(fanouts={self.fanouts}, replace={self.replace}, rank={self.rank}/{self.world}, "
                f"owned_seeds={self.owned_seeds})")
