r"""Node partitions of a graph for distributed propagation: owned rows plus the halo plan.

Each of ``P`` processes *owns* a set of nodes: their CSR rows (in-edges, sources as global ids),
their degrees and their feature rows. A hop of :func:`sgl.ops.dist_propagate_hops` needs, for
every owned row, the previous hop's rows of its sources; those owned elsewhere are the *halo*.
A :class:`GraphPartition` carries the plan of that exchange:

* ``recv_ids[q]``: the rows of rank ``q`` this partition's edges read (global ids, sorted,
  each once however many edges read it);
* ``send_local[q]``: positions (in ``nodes``) of this partition's rows that rank ``q`` reads.

Two ways to split (``method``): ``"metis"`` (``pymetis`` k-way on the symmetrised structure:
few cut edges, so small halos) and ``"range"`` (contiguous id ranges of equal node counts:
free to compute, and each rank knows every owner without an assignment array).

A graph larger than one machine is split once, offline, and each rank loads only its file::

    for part in partition_graph(graph, 4, "metis"):   # on a machine that holds the graph
        part.save("parts/")                           # parts/rank0.pt ... parts/rank3.pt
    part = GraphPartition.load("parts/", rank, world_size=4)   # on each of the 4 ranks

Example:
    >>> import torch
    >>> from sgl.data import Graph
    >>> from sgl.ops import partition_graph
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]]), x=torch.eye(4))
    >>> parts = partition_graph(g, 2, "range")
    >>> parts[0].nodes.tolist(), parts[0].recv_ids[1].tolist(), parts[0].cut_edges
    ([0, 1], [2], 1)
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional, Sequence, Union

import numpy as np
import torch

from sgl.errors import ConfigError, GraphError, StoreError
from sgl.fileio import atomic_write

__all__ = ["GraphPartition", "PARTITION_METHODS", "partition_assignment", "partition_graph", "local_partition"]

PARTITION_METHODS = ("metis", "range")
_FORMAT_VERSION = 1
_EMPTY = torch.zeros(0, dtype=torch.int64)


@dataclass
class GraphPartition:
    """One rank's piece of a graph (see the module docstring for the halo plan).

    Attributes:
        rank, num_parts (int): this piece's rank and the number of pieces (= processes).
        num_nodes (int): nodes of the whole graph.
        nodes (Tensor): ``[n_local]`` owned global node ids, ascending.
        indptr (Tensor): ``[n_local + 1]`` CSR row pointer of the owned rows.
        indices (Tensor): ``[e_local]`` source of each in-edge, as a global id.
        edge_weight (Tensor, optional): ``[e_local]`` edge weights.
        x (Tensor, optional): ``[n_local, d]`` owned feature rows.
        recv_ids (list of Tensor): per rank, the global ids of its rows this piece reads.
        send_local (list of Tensor): per rank, positions in ``nodes`` of the rows it reads.
        method (str): how the graph was split.
    """

    rank: int
    num_parts: int
    num_nodes: int
    nodes: torch.Tensor
    indptr: torch.Tensor
    indices: torch.Tensor
    edge_weight: Optional[torch.Tensor] = None
    x: Optional[torch.Tensor] = None
    recv_ids: List[torch.Tensor] = field(default_factory=list)
    send_local: List[torch.Tensor] = field(default_factory=list)
    method: str = "range"

    @property
    def num_local(self) -> int:
        return int(self.nodes.numel())

    @property
    def num_local_edges(self) -> int:
        return int(self.indices.numel())

    @property
    def halo_size(self) -> int:
        """Distinct rows of other ranks read per hop."""
        return int(sum(t.numel() for t in self.recv_ids))

    @property
    def send_size(self) -> int:
        """Own rows sent per hop (a row read by two ranks counts twice)."""
        return int(sum(t.numel() for t in self.send_local))

    @property
    def cut_edges(self) -> int:
        """In-edges of the owned rows whose source is owned by another rank."""
        return int((~self.owns(self.indices)).sum())

    def owns(self, ids: torch.Tensor) -> torch.Tensor:
        """Boolean mask: which global ``ids`` this piece owns."""
        pos = torch.searchsorted(self.nodes, ids).clamp_(max=max(self.num_local - 1, 0))
        return (self.nodes[pos] == ids) if self.num_local else torch.zeros_like(ids, dtype=torch.bool)

    def local_columns(self) -> torch.Tensor:
        """Column of every edge's source in ``[owned rows | halo rows in rank order]``."""
        own = self.owns(self.indices)
        cols = torch.empty_like(self.indices)
        cols[own] = torch.searchsorted(self.nodes, self.indices[own])
        halo = torch.cat(self.recv_ids) if self.recv_ids else _EMPTY
        order = torch.argsort(halo)
        pos = torch.searchsorted(halo[order], self.indices[~own])
        if pos.numel() and (pos.max() >= halo.numel() or bool((halo[order][pos] != self.indices[~own]).any())):
            raise GraphError(f"partition {self.rank}: an edge's source is neither owned nor in the halo plan; "
                             f"the partition is corrupt, rebuild it with partition_graph/local_partition")
        cols[~own] = order[pos] + self.num_local
        return cols

    def state_dict(self) -> dict:
        return {"format": _FORMAT_VERSION, "rank": self.rank, "num_parts": self.num_parts,
                "num_nodes": self.num_nodes, "method": self.method, "nodes": self.nodes, "indptr": self.indptr,
                "indices": self.indices, "edge_weight": self.edge_weight, "x": self.x,
                "recv_ids": list(self.recv_ids), "send_local": list(self.send_local)}

    def save(self, root: Union[str, os.PathLike]) -> Path:
        """Write this piece to ``root/rank<r>.pt`` atomically (tmp + rename); returns the path."""
        path = Path(root) / f"rank{self.rank}.pt"
        with atomic_write(path, "wb") as handle:
            torch.save(self.state_dict(), handle)
        return path

    @classmethod
    def load(cls, root: Union[str, os.PathLike], rank: int, world_size: Optional[int] = None) -> "GraphPartition":
        """Read ``root/rank<rank>.pt``; with ``world_size``, check it was split for that many processes."""
        path = Path(root) / f"rank{int(rank)}.pt"
        if not path.exists():
            found = sorted(p.name for p in Path(root).glob("rank*.pt")) if Path(root).is_dir() else []
            raise StoreError(f"no partition file {path} (found {found or 'none'}); write one per rank with "
                             f"GraphPartition.save or partition_graph(...)[r].save({str(root)!r})")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            if state.get("format") != _FORMAT_VERSION:
                raise StoreError(f"partition file {path} has format {state.get('format')!r}, "
                                 f"expected {_FORMAT_VERSION}; re-split the graph")
            part = cls(**{k: v for k, v in state.items() if k != "format"})
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 -- a truncated or foreign file, whatever the reader says
            raise StoreError(f"partition file {path} is unreadable ({type(exc).__name__}: {exc}); "
                             f"write it again with GraphPartition.save") from exc
        if world_size is not None and part.num_parts != int(world_size):
            raise ConfigError(f"partition file {path} was split for {part.num_parts} processes, but the world has "
                              f"{world_size}; re-split with partition_graph(graph, {world_size}) and save again")
        if part.rank != int(rank) or len(part.recv_ids) != part.num_parts or len(part.send_local) != part.num_parts:
            raise StoreError(f"partition file {path} holds rank {part.rank} of {part.num_parts} with "
                             f"{len(part.recv_ids)} halo lists; expected rank {rank}; re-split the graph")
        return part

    def __repr__(self) -> str:
        return (f"GraphPartition(rank={self.rank}/{self.num_parts}, nodes={self.num_local}/{self.num_nodes}, "
                f"edges={self.num_local_edges}, halo={self.halo_size}, cut_edges={self.cut_edges}, "
                f"method={self.method!r})")


def _check_parts(graph: Any, num_parts: Any, method: str) -> int:
    if method not in PARTITION_METHODS:
        raise ConfigError(f"unknown partition method {method!r}; choose one of {PARTITION_METHODS}")
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)) or num_parts < 1:
        raise ConfigError(f"num_parts must be a positive integer (one part per process), got {num_parts!r}")
    if num_parts > graph.num_nodes:
        raise ConfigError(f"cannot split a graph of {graph.num_nodes} nodes over {num_parts} processes: every "
                          f"process needs at least one node; use at most {graph.num_nodes} processes")
    return int(num_parts)


def partition_assignment(graph: Any, num_parts: int, method: str = "metis", *, seed: int = 0) -> torch.Tensor:
    """The part (rank) of every node: ``[num_nodes]`` int64 in ``[0, num_parts)``, no part empty.

    ``"range"`` gives part ``r`` the ids ``[r n / P, (r + 1) n / P)``; ``"metis"`` runs METIS
    (``pymetis``, ``seed``) on the symmetrised graph without self loops: the same inputs give the
    same parts, so every rank may compute it. A part METIS leaves empty (tiny or disconnected
    graphs) gets the last node of the largest part.
    """
    num_parts = _check_parts(graph, num_parts, method)
    n = graph.num_nodes
    if num_parts == 1:
        return torch.zeros(n, dtype=torch.int64)
    if method == "range":
        bounds = torch.arange(1, num_parts, dtype=torch.int64) * n // num_parts
        return torch.searchsorted(bounds, torch.arange(n, dtype=torch.int64), right=True)
    import pymetis
    import scipy.sparse as sp

    a = sp.csr_matrix((np.ones(graph.num_edges, dtype=np.int8), graph.indices.cpu().numpy(), graph.indptr.cpu().numpy()),
                      shape=(n, n))
    sym = (a + a.T).tocsr()
    sym.setdiag(0)
    sym.eliminate_zeros()
    adjacency = pymetis.CSRAdjacency(sym.indptr.astype(np.int64), sym.indices.astype(np.int64))
    _, membership = pymetis.part_graph(num_parts, adjacency, options=pymetis.Options(seed=int(seed)))
    parts = torch.as_tensor(np.asarray(membership, dtype=np.int64))
    for empty in torch.nonzero(torch.bincount(parts, minlength=num_parts) == 0).flatten().tolist():
        largest = int(torch.bincount(parts, minlength=num_parts).argmax())
        parts[torch.nonzero(parts == largest).flatten()[-1]] = empty
    return parts


def _check_assignment(assignment: Any, graph: Any, num_parts: int) -> torch.Tensor:
    parts = torch.as_tensor(assignment).to(torch.int64)
    if parts.shape != (graph.num_nodes,):
        raise ConfigError(f"assignment must give one part per node ({graph.num_nodes}), got shape {tuple(parts.shape)}")
    if parts.numel() and (int(parts.min()) < 0 or int(parts.max()) >= num_parts):
        raise ConfigError(f"assignment has parts in [{int(parts.min())}, {int(parts.max())}]; "
                          f"they must be in [0, {num_parts})")
    return parts


def _build(graph: Any, parts: torch.Tensor, num_parts: int, ranks: Sequence[int], x: Optional[torch.Tensor],
           method: str) -> List[GraphPartition]:
    """Pieces for ``ranks``; the halo plans of all ranks come from one pass over the edges."""
    n = graph.num_nodes
    src, dst = graph.indices, graph.destinations()
    cross = parts[src] != parts[dst]
    # one key per distinct (reading rank, source row): duplicates are edges sharing a halo row
    key = torch.unique(parts[dst[cross]] * n + src[cross])
    reader, row = key // n, key % n
    owner = parts[row]
    out = []
    for r in ranks:
        nodes = torch.nonzero(parts == r).flatten()
        starts, counts = graph.indptr[nodes], graph.indptr[nodes + 1] - graph.indptr[nodes]
        indptr = torch.zeros(nodes.numel() + 1, dtype=torch.int64)
        torch.cumsum(counts, 0, out=indptr[1:])
        total = int(indptr[-1])
        edges = torch.repeat_interleave(starts - indptr[:-1], counts, output_size=total) + torch.arange(total)
        mine_in, mine_out = reader == r, owner == r
        recv = [row[mine_in & (owner == q)] if q != r else _EMPTY for q in range(num_parts)]
        send = [torch.searchsorted(nodes, row[mine_out & (reader == q)]) if q != r else _EMPTY
                for q in range(num_parts)]
        out.append(GraphPartition(
            rank=int(r), num_parts=num_parts, num_nodes=n, nodes=nodes, indptr=indptr,
            indices=graph.indices[edges].clone(),
            edge_weight=None if graph.edge_weight is None else graph.edge_weight[edges].clone(),
            x=None if x is None else x[nodes].clone(), recv_ids=recv, send_local=send, method=method))
    return out


def _features(graph: Any, x: Optional[Any]) -> Optional[torch.Tensor]:
    from sgl.data.validation import check_features

    x = graph.x if x is None else x
    return None if x is None else check_features(x, graph.num_nodes)


def partition_graph(graph: Any, num_parts: int, method: str = "metis", *, seed: int = 0, x: Optional[Any] = None,
                    assignment: Optional[Any] = None) -> List[GraphPartition]:
    """Split ``graph`` into ``num_parts`` pieces on one process (e.g. to :meth:`~GraphPartition.save` them).

    Args:
        graph (Graph): the whole graph.
        num_parts (int): number of processes that will propagate.
        method (str): ``"metis"`` or ``"range"`` (see :func:`partition_assignment`).
        seed (int): METIS seed.
        x (Tensor, optional): ``[num_nodes, d]`` features; defaults to ``graph.x`` (may be absent).
        assignment (Tensor, optional): your own part of every node, instead of ``method``.
    """
    num_parts = _check_parts(graph, num_parts, method)
    parts = (partition_assignment(graph, num_parts, method, seed=seed) if assignment is None
             else _check_assignment(assignment, graph, num_parts))
    return _build(graph, parts, num_parts, range(num_parts), _features(graph, x), method)


def local_partition(graph: Any, rank: int, world_size: int, method: str = "metis", *, seed: int = 0,
                    x: Optional[Any] = None, assignment: Optional[Any] = None) -> GraphPartition:
    """Rank ``rank``'s piece of ``graph`` split over ``world_size`` processes; keeps only its rows.

    Every rank must pass the same graph, method and seed (or the same ``assignment``);
    :func:`sgl.ops.dist_propagate_hops` checks that the pieces fit together.
    """
    world_size = _check_parts(graph, world_size, method)
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < world_size:
        raise ConfigError(f"rank must be an integer in [0, {world_size}), got {rank!r}")
    parts = (partition_assignment(graph, world_size, method, seed=seed) if assignment is None
             else _check_assignment(assignment, graph, world_size))
    return _build(graph, parts, world_size, [int(rank)], _features(graph, x), method)[0]
