r"""RWGSL's pair scores: neighbourhood Jaccard index, the three-term similarity, label propagation."""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from sgl.data import Graph
from sgl.models.gsl.graphs import _contains, _edge_keys
from sgl.models.gsl.walks import _csr_of, _neighbor_lists
from sgl.ops import normalized_adjacency, spmm

__all__ = ["jaccard_pairs", "pair_scores", "label_propagation"]


def jaccard_pairs(graph: Graph, u: torch.Tensor, v: torch.Tensor, sorted_keys: Optional[torch.Tensor] = None,
                  block: int = 1 << 22) -> torch.Tensor:
    r"""Jaccard index :math:`|N(u) \cap N(v)| / |N(u) \cup N(v)|` of every pair (0 if both are isolated).

    For each pair the neighbour list of the lower-degree endpoint is expanded and each
    entry is tested for membership in the other endpoint's list with one ``searchsorted``
    over the sorted edge keys: :math:`O(\sum \min(d_u, d_v) \log E)` work, no dense matrix.
    The graph must be de-duplicated (set semantics).

    Example:
        >>> import torch
        >>> from sgl.data import Graph
        >>> g = Graph.from_edge_index(torch.tensor([[0, 2, 1, 2, 0, 3], [2, 0, 2, 1, 3, 0]]))
        >>> jaccard_pairs(g, torch.tensor([0, 0]), torch.tensor([1, 2])).tolist()   # N(0)={2,3}, N(1)={2}
        [0.5, 0.0]
    """
    n = graph.num_nodes
    indptr, indices, deg = _csr_of(graph)
    keys = _edge_keys(graph) if sorted_keys is None else sorted_keys
    du, dv = deg[u], deg[v]
    swap = dv < du
    a = torch.where(swap, v, u)  # the endpoint whose list is expanded
    b = torch.where(swap, u, v)
    da = deg[a]
    inter = torch.zeros(u.numel(), dtype=torch.float32)
    # pairs in chunks whose expansion has at most ~block entries
    cum = torch.cumsum(da, 0)
    start = 0
    while start < u.numel():
        base = int(cum[start - 1]) if start > 0 else 0
        stop = int(torch.searchsorted(cum, torch.tensor(base + block), right=True))
        stop = max(stop, start + 1)
        if int(da[start:stop].sum()):
            pos, w = _neighbor_lists(a[start:stop], indptr, indices, deg)
            pair = start + pos
            hit = _contains(keys, b[pair] * n + w)
            inter.index_add_(0, pair, hit.to(torch.float32))
        start = stop
    union = (du + dv).to(torch.float32) - inter
    return torch.where(union > 0, inter / union.clamp_min(1.0), torch.zeros_like(inter))


def pair_scores(feature_cos: torch.Tensor, jaccard: torch.Tensor, label_cos: torch.Tensor,
                exponents: Sequence[float]) -> torch.Tensor:
    r"""RWGSL's similarity :math:`\frac13[\operatorname{sgn}(c)|c|^{e_1} + J^{e_2} + \ell^{e_3}]`.

    Example:
        >>> import torch
        >>> pair_scores(torch.tensor([0.25, -0.25]), torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]),
        ...             (0.5, 1.0, 1.0)).tolist()
        [0.5, 0.1666666716337204]
    """
    e1, e2, e3 = (float(e) for e in exponents)
    c = torch.sign(feature_cos) * feature_cos.abs().pow(e1)
    return (c + jaccard.clamp_min(0).pow(e2) + label_cos.clamp_min(0).pow(e3)) / 3.0


def label_propagation(graph: Graph, labels: torch.Tensor, num_layers: int, alpha: float) -> torch.Tensor:
    r""":math:`Y \leftarrow (1-\alpha)\hat A Y + \alpha Y_0`, ``num_layers`` times (``Y_0`` = ``labels``).

    Example:
        >>> import torch
        >>> from sgl.data import Graph
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
        >>> label_propagation(g, torch.tensor([[1.0, 0.0], [0.0, 1.0]]), 1, 0.5).round(decimals=4).tolist()
        [[0.75, 0.25], [0.25, 0.75]]
    """
    adj = normalized_adjacency(graph)
    y = labels
    for _ in range(num_layers):
        y = (1.0 - alpha) * spmm(adj, y) + alpha * labels
    return y


def _segment_mean(values: torch.Tensor, owner: torch.Tensor, num_segments: int) -> torch.Tensor:
    total = torch.zeros(num_segments, dtype=values.dtype).index_add_(0, owner, values)
    count = torch.bincount(owner, minlength=num_segments).to(values.dtype)
    return total / count.clamp_min(1)
