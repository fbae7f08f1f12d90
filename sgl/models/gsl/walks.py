r"""Vectorized candidate generation of RWGSL: random walks, layer-wise neighbour samples.

Every function works on whole arrays of nodes at once (gathers over the CSR arrays, sorted
unique keys, segment ranks); there is no loop over nodes in Python, only over walk steps
and sample layers.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch

from sgl.data import Graph

__all__ = ["random_walks", "candidate_pairs", "distinct_layer_samples"]


def _csr_of(graph: Graph) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    indptr, indices = graph.indptr, graph.indices
    return indptr, indices, indptr[1:] - indptr[:-1]


def _random_neighbor(nodes: torch.Tensor, indptr: torch.Tensor, indices: torch.Tensor, deg: torch.Tensor,
                     generator: torch.Generator) -> torch.Tensor:
    """One uniform neighbour of every entry of ``nodes`` (-1 for -1 entries and isolated nodes)."""
    valid = nodes >= 0
    safe = nodes.clamp_min(0)
    d = deg[safe]
    ok = valid & (d > 0)
    offset = (torch.rand(nodes.shape, generator=generator) * d.to(torch.float64)).long()
    offset = torch.minimum(offset, (d - 1).clamp_min(0))
    pos = (indptr[safe] + offset).clamp(max=max(indices.numel() - 1, 0))
    out = indices[pos] if indices.numel() else torch.full_like(nodes, -1)
    return torch.where(ok, out, torch.full_like(nodes, -1))


def random_walks(graph: Graph, start: torch.Tensor, walk_length: int, num_walks: int = 1,
                 generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Uniform random walks: ``[len(start), num_walks * walk_length]`` visited nodes.

    Column ``j`` of a walk is the node reached after ``j + 1`` steps; a walk that reaches a
    node without neighbours stops there and the rest of its row is ``-1``.

    Example:
        >>> import torch
        >>> from sgl.data import Graph
        >>> path = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
        >>> random_walks(path, torch.tensor([0, 1]), walk_length=3).tolist()
        [[1, 0, 1], [0, 1, 0]]
    """
    generator = generator or torch.Generator().manual_seed(0)
    indptr, indices, deg = _csr_of(graph)
    cur = start.repeat_interleave(num_walks) if num_walks > 1 else start.clone()
    steps = []
    for _ in range(walk_length):  # loop over steps, vectorized over all walks
        cur = _random_neighbor(cur, indptr, indices, deg, generator)
        steps.append(cur)
    if not steps:
        return torch.empty(start.numel(), 0, dtype=torch.long)
    walks = torch.stack(steps, dim=1)
    return walks.view(start.numel(), num_walks * walk_length)


def _neighbor_lists(rows: torch.Tensor, indptr: torch.Tensor, indices: torch.Tensor,
                    deg: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Every neighbour of every entry of ``rows``: ``(position in rows, neighbour)``, row by row."""
    d = deg[rows]
    total = int(d.sum())
    pos = torch.repeat_interleave(torch.arange(rows.numel()), d, output_size=total)
    first = torch.repeat_interleave(torch.cumsum(d, 0) - d, d, output_size=total)
    return pos, indices[indptr[rows][pos] + (torch.arange(total) - first)]


def _layer_samples(graph: Graph, start: torch.Tensor, sizes: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    """Layer-wise sampled neighbourhood: ``[len(start), sum(sizes)]`` nodes (-1 = none)."""
    indptr, indices, deg = _csr_of(graph)
    layers = []
    previous = start.view(-1, 1)
    for size in sizes:
        if size == 0:
            continue
        # each sample of this layer expands a uniformly chosen member of the previous layer
        pick = torch.randint(0, previous.size(1), (start.numel(), size), generator=generator)
        parents = previous.gather(1, pick)
        layer = _random_neighbor(parents, indptr, indices, deg, generator)
        layers.append(layer)
        previous = layer
    if not layers:
        return torch.empty(start.numel(), 0, dtype=torch.long)
    return torch.cat(layers, dim=1)



def candidate_pairs(graph: Graph, nodes: torch.Tensor, num_samples: Sequence[int], walk_length: int,
                    num_walks: int, generator: torch.Generator) -> Tuple[torch.Tensor, torch.Tensor]:
    """De-duplicated candidate pairs ``(u, v)`` of ``nodes``, sorted by ``u`` then ``v``.

    Candidates: current neighbours, the layer-wise sample and the random-walk nodes;
    self-pairs are dropped.
    """
    n = graph.num_nodes
    indptr, indices, deg = _csr_of(graph)
    lo, hi = int(nodes[0]), int(nodes[-1]) + 1  # nodes is a contiguous block
    e_lo, e_hi = int(indptr[lo]), int(indptr[hi])
    neighbor_u = torch.repeat_interleave(torch.arange(lo, hi), deg[lo:hi], output_size=e_hi - e_lo)
    neighbor_v = indices[e_lo:e_hi]
    sampled = torch.cat([_layer_samples(graph, nodes, num_samples, generator),
                         random_walks(graph, nodes, walk_length, num_walks, generator)], dim=1)
    sampled_u = nodes.view(-1, 1).expand_as(sampled).reshape(-1)
    sampled_v = sampled.reshape(-1)
    u = torch.cat([neighbor_u, sampled_u])
    v = torch.cat([neighbor_v, sampled_v])
    keep = (v >= 0) & (v != u)
    keys = torch.unique(u[keep] * n + v[keep])  # sorted, so grouped by u
    return keys // n, keys % n


def _distinct_per_owner(owner: torch.Tensor, cand: torch.Tensor, size: int, n: int,
                        generator: torch.Generator) -> Tuple[torch.Tensor, torch.Tensor]:
    """Up to ``size`` distinct candidates per owner, uniform among its distinct ones (-1 entries dropped)."""
    keep = cand >= 0
    keys = torch.unique(owner[keep] * n + cand[keep])
    if keys.numel() == 0:
        return keys, keys
    o, v = keys // n, keys % n
    order = torch.argsort(torch.rand(o.numel(), generator=generator))
    order = order[torch.argsort(o[order], stable=True)]  # grouped by owner, random order inside
    o, v = o[order], v[order]
    first = torch.searchsorted(o, o, right=False)
    rank = torch.arange(o.numel()) - first
    take = rank < size
    return o[take], v[take]


def distinct_layer_samples(graph: Graph, nodes: torch.Tensor, sizes: Sequence[int],
                           generator: torch.Generator) -> Tuple[torch.Tensor, torch.Tensor]:
    """The authors' layer-wise sample of each node: distinct pairs ``(u, v)``, sorted, no self-pairs.

    Layer 1 draws ``min(deg(u), sizes[0])`` distinct neighbours of ``u`` without replacement;
    layer ``l`` draws up to ``sizes[l]`` distinct nodes among the neighbours of layer
    ``l - 1`` (each member of layer ``l - 1`` proposes ``sizes[l]`` random neighbours, so the
    draw is uniform over the proposals' distinct nodes -- the authors draw uniformly over the
    whole union). The sample is the union of the layers.

    Example:
        >>> import torch
        >>> from sgl.data import Graph
        >>> star = Graph.from_edge_index(torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]]))
        >>> u, v = distinct_layer_samples(star, torch.tensor([0]), (2,), torch.Generator().manual_seed(0))
        >>> u.tolist(), len(set(v.tolist())), set(v.tolist()) <= {1, 2, 3}
        ([0, 0], 2, True)
    """
    n = graph.num_nodes
    indptr, indices, deg = _csr_of(graph)
    out_u, out_v = [], []
    prev_u = prev_v = None
    for layer, size in enumerate(sizes):
        if size == 0:
            break
        if layer == 0:
            pos, cand = _neighbor_lists(nodes, indptr, indices, deg)
            owner = nodes[pos]
        else:
            parents = prev_v.view(-1, 1).expand(-1, size).reshape(-1)
            owner = prev_u.view(-1, 1).expand(-1, size).reshape(-1)
            cand = _random_neighbor(parents, indptr, indices, deg, generator)
        prev_u, prev_v = _distinct_per_owner(owner, cand, size, n, generator)
        if prev_u.numel() == 0:
            break
        out_u.append(prev_u)
        out_v.append(prev_v)
    if not out_u:
        empty = torch.empty(0, dtype=torch.long)
        return empty, empty
    u, v = torch.cat(out_u), torch.cat(out_v)
    keep = u != v
    keys = torch.unique(u[keep] * n + v[keep])
    return keys // n, keys % n
