r"""Multi-hop propagation over many processes: each rank computes its own rows of ``[X, MX, ..., M^kX]``.

The graph is split with :mod:`sgl.ops.partition`; rank ``r`` holds its rows of the operator
(in-edges of its nodes) and of ``X``. A hop :math:`H^{(l)} = M H^{(l-1)}` then needs, for
every owned row, the previous hop's rows of its sources: the owned ones are local, the *halo*
rows come from their owners in one uneven :func:`sgl.comm.all_to_all` per hop (each distinct
row once, however many edges read it), after which the product is a local SpMM of the
``[n_local, n_local + n_halo]`` block of :math:`M`. Before the first hop the ranks check that
their pieces fit together (same graph, world size, ``k`` and operator, matching halo plans)
and exchange once the degrees of the halo rows: :math:`\hat A_r = \tilde D^{r-1}\tilde A
\tilde D^{-r}` scales an edge by its *source's* degree, which lives on the source's owner.

The operators are those of :func:`sgl.ops.propagate_hops` with the same matrices (``adj`` with
any ``r`` and ``self_loops``, ``lazy``, ``heat``, ``ppr``; PPR's stopping test uses the global
maximum change, so every rank iterates equally often), so gathering every rank's rows gives
``propagate_hops``'s hops to rounding (exactly, in a one-process world, which calls it).

Run under ``torchrun --nproc-per-node 2 script.py`` (``comm.init()`` first) or with
:func:`sgl.comm.spawn`; see ``docs/distributed.md``.

Example (one process: the whole graph is rank 0's piece):
    >>> import torch
    >>> from sgl.data import Graph
    >>> from sgl.ops import dist_propagate_hops, local_partition, propagate_hops
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), x=torch.eye(3))
    >>> out = dist_propagate_hops(local_partition(g, rank=0, world_size=1), k=2)
    >>> all(torch.equal(a, b) for a, b in zip(out.hops, propagate_hops(g, g.x, k=2)))
    True
    >>> out.stats.bytes_received, out.stats.cut_edges
    ([0, 0], 0)
"""
from __future__ import annotations

import hashlib
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, List, Optional, Union

import numpy as np
import torch

from sgl import comm
from sgl.errors import CommError, ConfigError, FeatureError
from sgl.fileio import atomic_write
from sgl.ops.graph_ops import (
    GraphOperator, HeatKernel, LazyAdjacency, NormalizedAdjacency, PersonalizedPageRank, _with_self_loops,
    get_operator, spmm,
)
from sgl.ops.partition import GraphPartition

__all__ = ["dist_propagate_hops", "gather_hops", "DistHops", "HaloStats"]

_OPERATORS = (NormalizedAdjacency, LazyAdjacency, HeatKernel, PersonalizedPageRank)


@dataclass
class HaloStats:
    """What one rank exchanged: per hop (1..k) bytes and halo rows, plus its partition's cut edges.

    ``halo_rows[l]`` counts the rows received in hop ``l + 1``: the halo once for ``adj``/``lazy``,
    once per inner product for ``heat``/``ppr``; ``bytes_received[l] = halo_rows[l] * d * itemsize``.
    """

    bytes_sent: List[int] = field(default_factory=list)
    bytes_received: List[int] = field(default_factory=list)
    halo_rows: List[int] = field(default_factory=list)
    cut_edges: int = 0
    local_edges: int = 0

    def summary(self) -> str:
        mib = [f"{b / 2**20:.2f}" for b in self.bytes_received]
        return (f"cut edges {self.cut_edges:,} of {self.local_edges:,}; halo rows per hop {self.halo_rows}; "
                f"MiB received per hop {mib}")


@dataclass
class DistHops:
    """The result of :func:`dist_propagate_hops` on one rank.

    ``hops[l]`` is ``[n_local, d]``: rows ``nodes`` of :math:`M^l X` (``hops[0]`` is ``x``);
    ``paths`` lists the files written under ``out_dir`` (empty without it).
    """

    hops: List[torch.Tensor]
    nodes: torch.Tensor
    stats: HaloStats
    paths: List[Path] = field(default_factory=list)


def _spmm(adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    # ATen's row-parallel CSR kernel on CPU (sgl.ops.spmm); cuSPARSE elsewhere
    return spmm(adj, x) if x.device.type == "cpu" else torch.sparse.mm(adj, x.contiguous())


def _op_code(op: GraphOperator) -> int:
    return int.from_bytes(hashlib.blake2b(op.cache_key().encode(), digest_size=7).digest(), "little")


def _exchange_device(x: torch.Tensor) -> torch.device:
    """Where the send/receive buffers live: the backend's device (CPU for gloo, the rank's GPU for NCCL)."""
    from sgl.comm._wire import _comm_device

    return _comm_device(None) if comm.is_initialized() else x.device


class _Halo:
    """One rank's exchange of its rows along the plan, with byte counting and clear failures."""

    def __init__(self, part: GraphPartition, device: torch.device, wire: torch.device, timeout: Optional[float]):
        self.rank, self.timeout, self.wire = part.rank, timeout, wire
        self.send_idx = torch.cat(part.send_local).to(device)
        self.send_counts = [int(t.numel()) for t in part.send_local]
        self.recv_counts = [int(t.numel()) for t in part.recv_ids]
        self.sent = self.received = self.rows = 0
        self.hop = 0

    def __call__(self, h: torch.Tensor, what: str = "") -> torch.Tensor:
        data = h.index_select(0, self.send_idx).to(self.wire)
        got = self.collective(lambda: comm.all_to_all(data, self.send_counts, self.recv_counts,
                                                      timeout=self.timeout), what or f"hop {self.hop}")
        self.sent += data.numel() * data.element_size()
        self.received += got.numel() * got.element_size()
        self.rows += got.shape[0]
        return got.to(h.device)

    def collective(self, call: Callable[[], Any], what: str) -> Any:
        try:
            return call()
        except CommError as exc:
            raise CommError(
                f"dist_propagate_hops: the halo exchange of {what} failed on rank {self.rank}/"
                f"{comm.get_world_size()}: a peer rank probably died or stopped propagating ({exc}). Every "
                "rank must call dist_propagate_hops with the same k and operator; restart the job.") from exc

    def global_max(self, value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64, device=self.wire)
        return float(self.collective(lambda: comm.all_reduce(t, op="max", timeout=self.timeout), f"hop {self.hop}"))


def _check_pieces(part: GraphPartition, x: torch.Tensor, k: int, op: GraphOperator, halo: _Halo) -> None:
    """Every rank sees every rank's signature and its own halo check, so all raise together."""
    world, rank = comm.get_world_size(), comm.get_rank()
    dtype_code = ["float16", "bfloat16", "float32", "float64"].index(str(x.dtype).replace("torch.", ""))
    sig = torch.tensor([part.rank, part.num_parts, part.num_nodes, part.num_local, x.shape[1], dtype_code, k,
                        _op_code(op)], dtype=torch.int64, device=halo.wire)
    table = torch.stack(halo.collective(lambda: comm.all_gather(sig, timeout=halo.timeout), "the setup"))
    rows = table.tolist()
    problems = []
    if any(r[1] != world for r in rows):
        problems.append(f"the partitions were split for {sorted({r[1] for r in rows})} processes but the world "
                        f"has {world}; re-split with partition_graph(graph, {world})")
    elif [r[0] for r in rows] != list(range(world)):
        problems.append(f"ranks hold the pieces of ranks {[r[0] for r in rows]}; rank r must load piece r")
    for col, name in ((2, "num_nodes"), (4, "feature width"), (5, "feature dtype"), (6, "k"), (7, "operator")):
        if len({r[col] for r in rows}) > 1:
            problems.append(f"ranks disagree on {name} ({[r[col] for r in rows]})")
    if not problems and sum(r[3] for r in rows) != part.num_nodes:
        problems.append(f"the pieces own {sum(r[3] for r in rows)} nodes in all, not {part.num_nodes}: they come "
                        f"from different partitions")
    if problems:
        raise ConfigError(f"dist_propagate_hops on rank {rank}/{world}: " + "; ".join(problems))
    # each rank sends the ids it reads from each owner, who compares them with its send plan
    asked = halo.collective(lambda: comm.all_to_all([t.to(halo.wire) for t in part.recv_ids],
                                                    timeout=halo.timeout), "the setup")
    ok = all(torch.equal(a.cpu(), part.nodes[s]) for a, s in zip(asked, part.send_local))
    flags = torch.tensor([0 if ok else 1], dtype=torch.int64, device=halo.wire)
    halo.collective(lambda: comm.all_reduce(flags, op="max", timeout=halo.timeout), "the setup")
    if int(flags.item()):
        raise ConfigError(f"dist_propagate_hops on rank {rank}/{world}: the halo plans of the pieces do not match "
                          "(they were split with different graphs, methods or seeds); split once with "
                          "partition_graph and load every rank's piece from it")


def _local_matrix(part: GraphPartition, op: GraphOperator, dtype: torch.dtype, halo: _Halo,
                  device: torch.device) -> torch.Tensor:
    """The ``[n_local, n_local + n_halo]`` rows of the operator's normalised adjacency."""
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    n = part.num_local
    counts = part.indptr[1:] - part.indptr[:-1]
    values = None if part.edge_weight is None and not op.self_loops else (
        torch.ones(part.num_local_edges, dtype=acc) if part.edge_weight is None else part.edge_weight.to(acc))
    # the raw in-degree (edge count or weight sum) of every owned row; the loop adds 1 below
    raw = counts.to(acc) if part.edge_weight is None else torch.segment_reduce(
        values, "sum", lengths=counts, unsafe=True) if n else torch.zeros(0, dtype=acc)
    degree = torch.cat([raw, halo(raw.unsqueeze(1).to(device), "the degree exchange").squeeze(1).cpu()])
    cols = part.local_columns()
    indptr = part.indptr
    if op.self_loops:
        indptr, cols, values = _with_self_loops(indptr, cols, values, n)
        degree = degree + 1
    nonzero = degree > 0
    left, right = torch.zeros_like(degree), torch.zeros_like(degree)
    left[nonzero] = degree[nonzero].pow(float(op.r) - 1.0)
    right[nonzero] = degree[nonzero].pow(-float(op.r))
    norm = right[cols]
    norm.mul_(torch.repeat_interleave(left[:n], indptr[1:] - indptr[:-1], output_size=cols.numel()))
    if values is not None:
        norm.mul_(values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # CSR "beta" / invariant-check notices
        adj = torch.sparse_csr_tensor(indptr, cols, norm.to(dtype), (n, degree.numel()))
    return adj.to(device)


def _hop(op: GraphOperator, adj: torch.Tensor, h: torch.Tensor, halo: _Halo) -> torch.Tensor:
    """One application of ``op`` to the owned rows ``h``; every product exchanges the halo first."""
    def product(z: torch.Tensor) -> torch.Tensor:
        return _spmm(adj, torch.cat([z, halo(z)]))

    if isinstance(op, LazyAdjacency):
        return product(h).mul_(1.0 - float(op.alpha)).add_(h, alpha=float(op.alpha))
    if isinstance(op, HeatKernel):
        coef, term = math.exp(-float(op.t)), h
        out = h * coef
        for i in range(1, op.num_terms() + 1):
            term = product(term)
            coef *= float(op.t) / i
            out.add_(term, alpha=coef)
        return out
    if isinstance(op, PersonalizedPageRank):
        alpha = float(op.alpha)
        scale = halo.global_max(float(h.abs().max()) if h.numel() else 0.0)
        z, teleport = h.clone(), h * alpha
        for _ in range(op.max_iters):
            new = product(z).mul_(1.0 - alpha).add_(teleport)
            delta = halo.global_max(float((new - z).abs().max()) if new.numel() else 0.0)
            z = new
            if delta <= op.tol * max(scale, 1e-30):
                break
        return z
    return product(h)


def _write(out_dir: Union[str, os.PathLike], rank: int, nodes: torch.Tensor, hops: List[torch.Tensor]) -> List[Path]:
    folder = Path(out_dir) / f"rank{rank}"
    paths = []
    for name, tensor in [("nodes", nodes)] + [(f"hop{i}", h) for i, h in enumerate(hops)]:
        path = folder / f"{name}.pt"
        with atomic_write(path, "wb") as handle:
            torch.save(tensor.detach().cpu().contiguous(), handle)
        paths.append(path)
    return paths


def _reference_path(world: int, x: torch.Tensor) -> bool:
    """One process with host features: the whole graph is local, so propagate_hops is the answer."""
    return world == 1 and x.device.type == "cpu"


def dist_propagate_hops(
    partition: GraphPartition,
    k: int = 3,
    op: Union[str, GraphOperator] = "adj",
    *,
    x: Optional[Any] = None,
    out_dir: Optional[Union[str, os.PathLike]] = None,
    timeout: Optional[float] = None,
) -> DistHops:
    r"""This rank's rows of ``[X, MX, ..., M^k X]``, exchanging only halo rows between hops.

    Every rank of the :mod:`sgl.comm` world calls it with its own piece (rank ``r`` with piece
    ``r``) and the same ``k`` and ``op``. Before :func:`sgl.comm.init` the world is one process and
    the piece must be the whole graph (``world_size=1``).

    Args:
        partition (GraphPartition): this rank's piece (:func:`~sgl.ops.local_partition`,
            :meth:`GraphPartition.load`).
        k (int): number of hops.
        op (str or GraphOperator): as in :func:`sgl.ops.propagate_hops` (default :math:`\hat A_{0.5}`).
        x (Tensor, optional): ``[n_local, d]`` owned feature rows; defaults to ``partition.x``. The
            hops are made on its device; exchange buffers move to the backend's device.
        out_dir (path, optional): also write ``out_dir/rank<r>/hop<l>.pt`` (``l = 0..k``) and
            ``nodes.pt`` (their global ids), each atomically; :attr:`DistHops.paths` lists them.
        timeout (float, optional): seconds each exchange may wait (default: :func:`sgl.comm.init`'s).

    Returns:
        DistHops: ``hops`` (``k + 1`` tensors), ``nodes``, ``stats`` (:class:`HaloStats`), ``paths``.

    Raises:
        ConfigError: the pieces do not fit this world (other world size, other split, other ``k``/``op``).
        CommError: a peer died or stopped (after at most ``timeout``).
    """
    from sgl.ops.propagate import propagate_hops

    if not isinstance(partition, GraphPartition):
        raise ConfigError(f"partition must be a GraphPartition (sgl.ops.local_partition), "
                          f"got {type(partition).__name__}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ConfigError(f"k must be a non-negative integer number of hops, got {k!r}")
    k, op = int(k), get_operator(op)
    if type(op) not in _OPERATORS:
        raise ConfigError(f"dist_propagate_hops computes the adj, lazy, heat and ppr operators, "
                          f"not {type(op).__name__}")
    x = partition.x if x is None else x
    if x is None:
        raise FeatureError("the partition has no feature rows; pass x=... (this rank's [n_local, d] rows)")
    from sgl.data.validation import check_features

    x = check_features(x, partition.num_local, "x (this rank's feature rows)")
    world = comm.get_world_size()
    stats = HaloStats(cut_edges=partition.cut_edges, local_edges=partition.num_local_edges)
    if world == 1 and partition.num_parts != 1:
        raise ConfigError(f"this piece is rank {partition.rank} of {partition.num_parts}, but the world has one "
                              f"process; call comm.init() under torchrun (or comm.spawn) with {partition.num_parts} "
                              f"processes, or split with world_size=1")
    if _reference_path(world, x):
        from sgl.data import Graph

        graph = Graph(partition.indptr, partition.indices, partition.edge_weight, num_nodes=partition.num_nodes)
        hops = propagate_hops(graph, x, k, op)
        stats.bytes_sent, stats.bytes_received, stats.halo_rows = [0] * k, [0] * k, [0] * k
    else:
        halo = _Halo(partition, x.device, _exchange_device(x), timeout)
        _check_pieces(partition, x, k, op, halo)
        adj = _local_matrix(partition, op, x.dtype, halo, x.device)
        hops = [x]
        for hop in range(1, k + 1):
            halo.hop, halo.sent, halo.received, halo.rows = hop, 0, 0, 0
            hops.append(_hop(op, adj, hops[-1], halo))
            stats.bytes_sent.append(halo.sent)
            stats.bytes_received.append(halo.received)
            stats.halo_rows.append(halo.rows)
    paths = _write(out_dir, partition.rank, partition.nodes, hops) if out_dir is not None else []
    return DistHops(hops=hops, nodes=partition.nodes, stats=stats, paths=paths)


def gather_hops(result: DistHops, timeout: Optional[float] = None) -> List[torch.Tensor]:
    """Every rank's rows assembled into the full ``[num_nodes, d]`` hops, on every rank (small graphs, tests).

    >>> import torch
    >>> from sgl.data import Graph
    >>> from sgl.ops import dist_propagate_hops, local_partition
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.eye(2))
    >>> [h.shape for h in gather_hops(dist_propagate_hops(local_partition(g, 0, 1), k=1))]
    [torch.Size([2, 2]), torch.Size([2, 2])]
    """
    nodes = torch.cat(comm.all_gather(result.nodes.to(_exchange_device(result.hops[0])), timeout=timeout)).cpu()
    out = []
    for h in result.hops:
        rows = torch.cat(comm.all_gather(h.to(_exchange_device(h)), timeout=timeout)).to(h.device)
        full = torch.empty_like(rows)
        full[nodes.to(h.device)] = rows
        out.append(full)
    return out
