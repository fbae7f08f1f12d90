r"""Subgraph samplers: GraphSAINT (node / edge / random-walk) and Cluster-GCN.

Both hand the model a *subgraph* batch: every layer runs on the same induced subgraph, so the
batch carries ``num_layers`` copies of one square :class:`Block` and the model outputs a row
for every subgraph node (the loss uses the training nodes among them).

**GraphSAINT** (Zeng et al., ICLR 2020). A sampler draws a node set :math:`V_s`, the batch is
the induced subgraph :math:`G_s`. Pre-sampling ``num_norm_samples`` subgraphs counts
:math:`C_v` (subgraphs holding ``v``) and :math:`C_{u,v}` (holding edge ``u -> v``); an edge's
aggregation weight is :math:`\tilde A_{vu} / \alpha_{u,v}` with
:math:`\alpha_{u,v} = C_{u,v} / C_v` and :math:`\tilde A = D^{-1} A` (mean over the full
neighbourhood), so that :math:`E[\sum_{u \in N(v) \cap V_s} \tilde A_{vu} x_u / \alpha_{u,v}
\mid v \in V_s] = \sum_{u \in N(v)} \tilde A_{vu} x_u` — the full-graph aggregate. The loss
weight of node ``v`` is :math:`\lambda_v^{-1} \propto n / (N \cdot C_v)`
(``node_norm``), making the mini-batch loss an unbiased estimate of the full-graph loss.

* node sampler: ``budget`` draws with replacement, :math:`p_v \propto \|\tilde A_{:,v}\|^2`;
* edge sampler: ``budget`` edge draws, :math:`p_{(u,v)} \propto 1/\deg u + 1/\deg v`;
* random-walk sampler: ``budget`` uniform roots, walks of ``walk_length`` steps.

**Cluster-GCN** (Chiang et al., KDD 2019): METIS (``pymetis``) splits the graph into
``num_parts`` clusters; a batch is the subgraph induced by ``clusters_per_batch`` random
clusters (between-cluster edges among them are kept), aggregated by a plain mean.

Example:
    >>> import sgl, numpy as np
    >>> from sgl.samplers import GraphSAINTSampler
    >>> g = sgl.datasets.load("karate")
    >>> sampler = GraphSAINTSampler(g, "rw", budget=4, walk_length=2, num_norm_samples=50, seed=0)
    >>> batch = sampler.sample(np.random.default_rng(1), num_layers=2)
    >>> len(batch.blocks), batch.blocks[0].num_src == batch.blocks[0].num_dst == batch.n_id.numel()
    (2, True)
    >>> bool((batch.node_norm > 0).all())
    True
"""
from __future__ import annotations

from numbers import Integral
from typing import Any, Iterator, List, Optional

import numpy as np
import torch

from sgl.errors import ConfigError, GraphError
from sgl.samplers.block import Block, MiniBatch

__all__ = ["GraphSAINTSampler", "ClusterGCNSampler", "SubgraphLoader", "induced_edges"]


def _check_positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def induced_edges(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray, mapping: np.ndarray):
    """Edges of the subgraph induced by ``nodes`` (unique): ``(local_src, local_dst, global_edge_pos)``.

    ``mapping`` is a ``num_nodes`` buffer of -1 (restored before returning).
    """
    mapping[nodes] = np.arange(nodes.size)
    try:
        start, end = indptr[nodes], indptr[nodes + 1]
        counts = end - start
        row = np.repeat(np.arange(nodes.size), counts)
        pos = np.repeat(start - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        src = mapping[indices[pos]]
        keep = src >= 0
        return src[keep], row[keep], pos[keep]
    finally:
        mapping[nodes] = -1


class _SubgraphSampler:
    def __init__(self, graph: Any) -> None:
        if not hasattr(graph, "indptr") or not hasattr(graph, "indices"):
            raise GraphError(f"expected an in-memory Graph, got {type(graph).__name__}")
        self.indptr = graph.indptr.numpy() if isinstance(graph.indptr, torch.Tensor) else np.asarray(graph.indptr)
        self.indices = graph.indices.numpy() if isinstance(graph.indices, torch.Tensor) else np.asarray(graph.indices)
        self.num_nodes = self.indptr.size - 1
        self.deg = np.diff(self.indptr)
        self._map = np.full(self.num_nodes, -1, dtype=np.int64)

    def _batch(self, nodes: np.ndarray, num_layers: int, weight_of_edge=None, node_norm=None) -> MiniBatch:
        src, dst, pos = induced_edges(self.indptr, self.indices, nodes, self._map)
        weight = None if weight_of_edge is None else torch.from_numpy(weight_of_edge(pos, nodes[dst])).float()
        block = Block(torch.from_numpy(np.stack([src, dst])), int(nodes.size), int(nodes.size), weight)
        n_id = torch.from_numpy(nodes)
        return MiniBatch(n_id=n_id, blocks=[block] * num_layers, output_nodes=n_id,
                         node_norm=None if node_norm is None else torch.from_numpy(node_norm).float())


class GraphSAINTSampler(_SubgraphSampler):
    """GraphSAINT node/edge/random-walk sampling with pre-sampled normalisation.

    Args:
        graph: an in-memory :class:`sgl.data.Graph`.
        kind: ``"node"``, ``"edge"`` or ``"rw"``.
        budget: node draws, edge draws, or random-walk roots per subgraph.
        walk_length: steps per walk (``"rw"``).
        num_norm_samples: subgraphs pre-sampled to estimate the normalisation (0 = none:
            plain mean aggregation and unit loss weights, i.e. biased).
        seed: seed of the pre-sampling.
    """

    def __init__(self, graph: Any, kind: str = "rw", budget: int = 1000, walk_length: int = 2,
                 num_norm_samples: int = 50, seed: int = 0) -> None:
        super().__init__(graph)
        if kind not in ("node", "edge", "rw"):
            raise ConfigError(f"GraphSAINT kind must be 'node', 'edge' or 'rw', got {kind!r}")
        self.kind, self.budget = kind, _check_positive(budget, "budget")
        self.walk_length = _check_positive(walk_length, "walk_length")
        if isinstance(num_norm_samples, bool) or not isinstance(num_norm_samples, Integral) or num_norm_samples < 0:
            raise ConfigError(f"num_norm_samples must be an integer >= 0, got {num_norm_samples!r}")
        if self.indices.size == 0:
            raise GraphError("GraphSAINT needs a graph with edges")
        inv = 1.0 / np.maximum(self.deg, 1)
        dst = np.repeat(np.arange(self.num_nodes), self.deg)
        if kind == "node":
            # ||Ã[:, v]||^2 with Ã = D^-1 A: sum over the rows w that read v of 1/deg(w)^2
            weight = np.bincount(self.indices, weights=inv[dst] ** 2, minlength=self.num_nodes)
            self._p = weight / weight.sum()
        elif kind == "edge":
            weight = inv[self.indices] + inv[dst]
            self._p = weight / weight.sum()
        self.node_count = np.zeros(self.num_nodes)
        self.edge_count = np.zeros(self.indices.size)
        self.num_norm_samples = int(num_norm_samples)
        if num_norm_samples:
            rng = np.random.default_rng(seed)
            for _ in range(num_norm_samples):
                nodes = self.sample_nodes(rng)
                self.node_count[nodes] += 1
                _, _, pos = induced_edges(self.indptr, self.indices, nodes, self._map)
                self.edge_count[pos] += 1

    def sample_nodes(self, rng: np.random.Generator) -> np.ndarray:
        """The node set of one subgraph (sorted, unique)."""
        if self.kind == "node":
            return np.unique(rng.choice(self.num_nodes, self.budget, p=self._p))
        if self.kind == "edge":
            pos = rng.choice(self.indices.size, self.budget, p=self._p)
            dst = np.searchsorted(self.indptr, pos, side="right") - 1
            return np.unique(np.concatenate([self.indices[pos], dst]))
        walk = [rng.integers(0, self.num_nodes, self.budget)]
        current = walk[0]
        for _ in range(self.walk_length):
            deg = self.deg[current]
            step = self.indptr[current] + (rng.random(current.size) * np.maximum(deg, 1)).astype(np.int64)
            current = np.where(deg > 0, self.indices[np.minimum(step, self.indices.size - 1)], current)
            walk.append(current)
        return np.unique(np.concatenate(walk))

    def edge_weight(self, pos: np.ndarray, dst_nodes: np.ndarray) -> np.ndarray:
        """Aggregation weight of edges at ``pos`` ending at ``dst_nodes``: Ã_vu · C_v / C_uv."""
        base = 1.0 / np.maximum(self.deg[dst_nodes], 1)
        if not self.num_norm_samples:
            return base
        return base * self.node_count[dst_nodes] / np.maximum(self.edge_count[pos], 1)

    def node_norm(self, nodes: np.ndarray) -> np.ndarray:
        if not self.num_norm_samples:
            return np.full(nodes.size, 1.0 / nodes.size)
        return self.num_norm_samples / np.maximum(self.node_count[nodes], 1) / self.num_nodes

    def sample(self, rng: np.random.Generator, num_layers: int = 2) -> MiniBatch:
        nodes = self.sample_nodes(rng)
        return self._batch(nodes, num_layers, self.edge_weight, self.node_norm(nodes))

    def __repr__(self) -> str:
        return (f"GraphSAINTSampler(kind={self.kind}, budget={self.budget}, walk_length={self.walk_length}, "
                f"num_norm_samples={self.num_norm_samples})")


class ClusterGCNSampler(_SubgraphSampler):
    """Cluster-GCN batches over METIS partitions (``pymetis``).

    Args:
        graph: an in-memory :class:`sgl.data.Graph` (treated as undirected for METIS).
        num_parts: METIS clusters.
        clusters_per_batch: clusters merged into one batch.
    """

    def __init__(self, graph: Any, num_parts: int = 32, clusters_per_batch: int = 4, seed: int = 0) -> None:
        super().__init__(graph)
        self.num_parts = _check_positive(num_parts, "num_parts")
        self.clusters_per_batch = _check_positive(clusters_per_batch, "clusters_per_batch")
        if self.num_parts > self.num_nodes:
            raise ConfigError(f"num_parts={num_parts} exceeds the number of nodes ({self.num_nodes})")
        import pymetis
        import scipy.sparse as sp

        a = sp.csr_matrix((np.ones(self.indices.size), self.indices, self.indptr),
                          shape=(self.num_nodes, self.num_nodes))
        a = (a + a.T).tocsr()
        a.setdiag(0)
        a.eliminate_zeros()
        if self.num_parts == 1:
            membership = np.zeros(self.num_nodes, dtype=np.int64)
        else:
            opts = pymetis.Options(seed=int(seed))
            adjacency = pymetis.CSRAdjacency(a.indptr.astype(np.int64), a.indices.astype(np.int64))
            _, membership = pymetis.part_graph(self.num_parts, adjacency, options=opts)
            membership = np.asarray(membership, dtype=np.int64)
        self.membership = membership
        order = np.argsort(membership, kind="stable")
        bounds = np.searchsorted(membership[order], np.arange(self.num_parts + 1))
        self.clusters = [order[bounds[p]:bounds[p + 1]] for p in range(self.num_parts)]

    def batches(self, rng: np.random.Generator) -> List[np.ndarray]:
        """One epoch: every cluster once, in random groups of ``clusters_per_batch``."""
        perm = rng.permutation(self.num_parts)
        out = []
        for i in range(0, perm.size, self.clusters_per_batch):
            nodes = np.concatenate([self.clusters[c] for c in perm[i:i + self.clusters_per_batch]])
            if nodes.size:
                out.append(np.sort(nodes))
        return out

    def subgraph(self, nodes: np.ndarray, num_layers: int = 2) -> MiniBatch:
        return self._batch(nodes, num_layers)

    def __repr__(self) -> str:
        return f"ClusterGCNSampler(num_parts={self.num_parts}, clusters_per_batch={self.clusters_per_batch})"


class SubgraphLoader:
    """Iterate subgraph batches: GraphSAINT (``steps`` samples per epoch) or Cluster-GCN (all clusters)."""

    def __init__(self, sampler: Any, num_layers: int = 2, steps: Optional[int] = None, seed: int = 0) -> None:
        self.sampler, self.num_layers, self.seed, self.epoch = sampler, int(num_layers), int(seed), 0
        if isinstance(sampler, GraphSAINTSampler):
            expected = max(1, int(sampler.node_count.sum() / max(1, sampler.num_norm_samples))) \
                if sampler.num_norm_samples else sampler.budget
            self.steps = steps or max(1, -(-sampler.num_nodes // expected))
        else:
            self.steps = steps

    def __iter__(self) -> Iterator[MiniBatch]:
        rng = np.random.default_rng([self.seed, self.epoch])
        self.epoch += 1
        if isinstance(self.sampler, GraphSAINTSampler):
            for _ in range(self.steps):
                yield self.sampler.sample(rng, self.num_layers)
        else:
            for nodes in self.sampler.batches(rng):
                yield self.sampler.subgraph(nodes, self.num_layers)

    def __len__(self) -> int:
        return self.steps if self.steps is not None else -(-self.sampler.num_parts // self.sampler.clusters_per_batch)
