r"""Parameter-free propagation on heterogeneous graphs: type adjacencies, NARS relation
subsets, and features for featureless node types.

Relations are read **in both directions** (a heterogeneous graph stores one direction per
relation; NARS and SeHGNN both treat relations as undirected). For node types ``d`` and
``s`` the *mean adjacency* is :math:`\hat A_{ds} = D_{ds}^{-1} A_{ds}`, where
:math:`A_{ds}` stacks every relation ``s -> d`` and the reverse of every relation ``d -> s``.

**NARS** (Yu et al., 2020): sample relation subsets :math:`R_1..R_S`; in the homogeneous
graph :math:`G_i` of subset :math:`R_i` (all node types, the edges of :math:`R_i` in both
directions) propagate :math:`X^{(l+1)} = D_i^{-1} A_i X^{(l)}` for :math:`l < k`, keeping the
target rows. Computed per relation, so no homogeneous graph is ever built; the result equals
:func:`~sgl.ops.propagate_hops` with ``NormalizedAdjacency(r=0, self_loops=False)`` on
``to_homogeneous(subset, symmetric=True)`` (tested).
"""
from __future__ import annotations

import itertools
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from sgl._checks import check_choice, check_int
from sgl.data.csr import csr_from_coo
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.ops.graph_ops import spmm

__all__ = ["relation_adjacency", "mean_adjacency", "type_neighbours", "sample_relation_subsets",
           "nars_propagate", "fill_featureless"]

EdgeType = Tuple[str, str, str]


def _sparse_csr(indptr: torch.Tensor, indices: torch.Tensor, values: torch.Tensor, shape: Tuple[int, int]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(indptr, indices, values, shape)


def relation_adjacency(hg: Any, etype: EdgeType, reverse: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(indptr, indices)`` of relation ``etype`` grouped by destination, or (``reverse``) by source."""
    indptr, indices = hg.csr(etype)
    if not reverse:
        return indptr, indices
    ei = hg.edge_index(etype)
    rev_indptr, rev_indices, _ = csr_from_coo(ei[1], ei[0], hg.num_nodes_dict[etype[0]], need_order=False)
    return rev_indptr, rev_indices


def _blocks(hg: Any, dst: str, src: str, relations: Optional[Sequence[EdgeType]]) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """CSR blocks [n_dst x n_src] of every relation between ``src`` and ``dst`` (either direction)."""
    chosen = hg.edge_types if relations is None else list(relations)
    blocks = []
    for etype in chosen:
        s, _, d = etype
        if s == src and d == dst:
            blocks.append(relation_adjacency(hg, etype))
        if d == src and s == dst:  # the reverse of a relation dst -> src (both, for a type to itself)
            blocks.append(relation_adjacency(hg, etype, reverse=True))
    return blocks


def _stack(blocks: List[Tuple[torch.Tensor, torch.Tensor]], n_dst: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Row-wise union of CSR blocks with the same shape (duplicates kept, as multi-edges)."""
    if len(blocks) == 1:
        return blocks[0]
    rows = torch.cat([torch.repeat_interleave(torch.arange(n_dst), p[1:] - p[:-1]) for p, _ in blocks])
    cols = torch.cat([i for _, i in blocks])
    indptr, indices, _ = csr_from_coo(cols, rows, n_dst, need_order=False)
    return indptr, indices


def mean_adjacency(hg: Any, dst: str, src: str, relations: Optional[Sequence[EdgeType]] = None,
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    r""":math:`\hat A_{ds} = D^{-1}A_{ds}` as a sparse CSR ``[n_dst, n_src]`` (zero rows for nodes
    without ``src`` neighbours); ``GraphError`` when no relation joins the two types.

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"p": 2, "a": 2}, {("a", "w", "p"): torch.tensor([[0, 1, 1], [0, 0, 1]])})
        >>> mean_adjacency(g, "p", "a").to_dense().tolist()
        [[0.5, 0.5], [0.0, 1.0]]
        >>> mean_adjacency(g, "a", "p").to_dense().tolist()
        [[1.0, 0.0], [0.5, 0.5]]
    """
    blocks = _blocks(hg, dst, src, relations)
    if not blocks:
        raise GraphError(f"no relation joins node types {src!r} and {dst!r}; relations: {hg.edge_types}")
    n_dst, n_src = hg.num_nodes_dict[dst], hg.num_nodes_dict[src]
    indptr, indices = _stack(blocks, n_dst)
    counts = indptr[1:] - indptr[:-1]
    inv = torch.where(counts > 0, 1.0 / counts.clamp_min(1).to(dtype), torch.zeros((), dtype=dtype))
    values = torch.repeat_interleave(inv, counts, output_size=indices.numel())
    return _sparse_csr(indptr, indices, values, (n_dst, n_src))


def type_neighbours(hg: Any, relations: Optional[Sequence[EdgeType]] = None) -> Dict[str, List[str]]:
    """For each node type, the types joined to it by a relation (either direction), in a fixed order."""
    chosen = hg.edge_types if relations is None else list(relations)
    out: Dict[str, List[str]] = {t: [] for t in hg.node_types}
    for s, _, d in chosen:
        if s not in out[d]:
            out[d].append(s)
        if d not in out[s]:
            out[s].append(d)
    return out


def sample_relation_subsets(hg: Any, num_subsets: int, seed: int = 0, include_full: bool = True) -> List[List[EdgeType]]:
    """``num_subsets`` distinct relation subsets that each touch the target type (NARS's sampling).

    When there are at most ``num_subsets`` such subsets, all of them are returned (in a fixed
    order); otherwise a seeded sample, containing the full relation set when ``include_full``.

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"p": 2, "a": 1, "s": 1},
        ...     {("a", "w", "p"): torch.tensor([[0], [0]]), ("s", "h", "p"): torch.tensor([[0], [1]])}, target="p")
        >>> [[r for _, r, _ in s] for s in sample_relation_subsets(g, 8)]
        [['w'], ['h'], ['w', 'h']]
    """
    check_int(num_subsets, "num_subsets", 1)
    target = hg.require_target()
    relations = hg.edge_types
    if not relations:
        raise GraphError("the heterogeneous graph has no relations to sample subsets from")
    candidates = [list(c) for size in range(1, len(relations) + 1) for c in itertools.combinations(relations, size)
                  if any(target in (s, d) for s, _, d in c)]
    if not candidates:
        raise GraphError(f"no relation touches the target type {target!r}; its nodes would get no neighbours")
    if len(candidates) <= num_subsets:
        return candidates
    generator = torch.Generator().manual_seed(seed)
    full = candidates[-1]
    pool = candidates[:-1] if include_full else candidates
    picks = torch.randperm(len(pool), generator=generator)[:num_subsets - int(include_full)].sort().values
    return [pool[i] for i in picks.tolist()] + ([full] if include_full else [])


def _common_features(hg: Any, x_dict: Dict[str, torch.Tensor], types: Sequence[str]) -> int:
    missing = [t for t in types if t not in x_dict]
    if missing:
        raise FeatureError(f"node types {missing} have no features; NARS propagates features of every type it "
                           f"touches: fill them first (sgl.ops.fill_featureless)")
    widths = {t: int(x_dict[t].size(1)) for t in types}
    if len(set(widths.values())) != 1:
        raise FeatureError(f"NARS needs one feature width across node types, got {widths}; align them first "
                           f"(sgl.ops.align_type_features, which NARS-SIGN and heterogeneous GAMLP apply with "
                           f"their default type_width > 0)")
    return next(iter(widths.values()))


@torch.no_grad()
def nars_propagate(hg: Any, subsets: Sequence[Sequence[EdgeType]], k: int,
                   x_dict: Optional[Dict[str, torch.Tensor]] = None, progress: bool = False) -> List[torch.Tensor]:
    """Per hop ``l = 0..k`` a ``[num_subsets, n_target, d]`` tensor of NARS features (hop 0: raw).

    ``x_dict`` defaults to ``hg.x_dict``; every node type a subset touches needs features of
    one width.
    """
    check_int(k, "k", 0)
    target = hg.require_target()
    x_dict = dict(hg.x_dict if x_dict is None else x_dict)
    if not subsets:
        raise ConfigError("nars_propagate needs at least one relation subset")
    per_subset: List[List[torch.Tensor]] = []
    subsets = [[hg.check_relation(tuple(r)) for r in subset] for subset in subsets]
    iterator = subsets
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(subsets, desc="NARS subsets", leave=False)
    for subset in iterator:
        neighbours = type_neighbours(hg, subset)
        types = [t for t in hg.node_types if neighbours[t] or t == target]
        _common_features(hg, x_dict, types)
        # D_i^{-1} A_i restricted to the rows of type t: one CSR over all incident relations
        adjs = {t: {s: mean_adjacency(hg, t, s, subset) for s in neighbours[t]} for t in types}
        degree = {t: {s: hg_degree(hg, t, s, subset) for s in neighbours[t]} for t in types}
        current = {t: x_dict[t].float() for t in types}
        hops = [current[target]]
        for _ in range(k):
            nxt = {}
            for t in types:
                total = torch.zeros_like(current[t])
                deg = torch.zeros(current[t].size(0))
                for s in neighbours[t]:
                    # mean_adjacency divides by the per-type degree; re-weight to the subset's total degree
                    total += spmm(adjs[t][s], current[s]) * degree[t][s].unsqueeze(1)
                    deg += degree[t][s]
                nxt[t] = total / deg.clamp_min(1).unsqueeze(1)
            current = nxt
            hops.append(current[target])
        per_subset.append(hops)
    return [torch.stack([hops[hop] for hops in per_subset]) for hop in range(k + 1)]


def hg_degree(hg: Any, dst: str, src: str, relations: Optional[Sequence[EdgeType]] = None) -> torch.Tensor:
    """Number of ``src`` neighbours (edges, both directions, duplicates counted) of each ``dst`` node."""
    deg = torch.zeros(hg.num_nodes_dict[dst])
    for indptr, _ in _blocks(hg, dst, src, relations):
        deg += (indptr[1:] - indptr[:-1]).float()
    return deg


@torch.no_grad()
def fill_featureless(hg: Any, method: str = "mean", dim: Optional[int] = None, seed: int = 0,
                     x_dict: Optional[Dict[str, torch.Tensor]] = None) -> Dict[str, torch.Tensor]:
    """Features for every type: given ones kept, featureless types filled (``x_dict``, default
    ``hg.x_dict``, holds the given features, e.g. after :func:`~sgl.ops.align_type_features`).

    * ``"mean"``: the mean of the features of the type's featured neighbours (all relations,
      both directions), repeated outward until every reachable type has features (authors
      of ogbn-mag get their papers' mean, institutions their authors' mean);
    * ``"random"``: seeded Gaussian rows of width ``dim`` (default: the target's width),
      :math:`N(0, 1/d)` -- a fixed random embedding, what learned (TransE/ComplEx) embeddings
      start from;
    * ``"transe"``: TransE embeddings of width ``dim`` (default: the target's width) trained
      on the graph's triples (:func:`sgl.ops.hetero_embed.transe_embeddings`, a few seeded
      epochs), scaled to the mean row norm of the target's features -- the leaderboard
      entries' initialisation (they use DGL-KE's TransE/ComplEx).

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"p": 2, "s": 1}, {("s", "h", "p"): torch.tensor([[0, 0], [0, 1]])},
        ...                                 x_dict={"p": torch.tensor([[1.0, 0.0], [0.0, 3.0]])}, target="p")
        >>> fill_featureless(g)["s"].tolist()
        [[0.5, 1.5]]
    """
    check_choice(method, "method", ("mean", "random", "transe"))
    x_dict = dict(hg.x_dict if x_dict is None else x_dict)
    missing = [t for t in hg.node_types if t not in x_dict]
    if not missing:
        return x_dict
    if method == "transe":
        from sgl.ops.hetero_embed import transe_embeddings

        width = dim if dim is not None else (hg.num_features or None)
        if width is None:
            raise FeatureError("fill_featureless(method='transe') needs dim=... when the target has no features")
        target = hg.x_dict.get(hg.target) if hg.target is not None else None
        scale = float(target.float().norm(dim=1).mean()) if target is not None and target.numel() else None
        x_dict.update(transe_embeddings(hg, width, types=missing, seed=seed, scale=scale))
        return x_dict
    if method == "random":
        width = dim if dim is not None else (hg.num_features or None)
        if width is None:
            raise FeatureError("fill_featureless(method='random') needs dim=... when the target has no features")
        check_int(width, "dim", 1)
        generator = torch.Generator().manual_seed(seed)
        for t in missing:
            x_dict[t] = torch.randn(hg.num_nodes_dict[t], width, generator=generator) / width ** 0.5
        return x_dict
    if not x_dict:
        raise FeatureError("no node type has features to average from; use method='random'")
    neighbours = type_neighbours(hg)
    while missing:
        progress = False
        for t in list(missing):
            sources = [s for s in neighbours[t] if s in x_dict]
            widths = {int(x_dict[s].size(1)) for s in sources}
            if not sources:
                continue
            if len(widths) != 1:
                raise FeatureError(f"the neighbours {sources} of featureless type {t!r} have different feature "
                                   f"widths {sorted(widths)}; use method='random'")
            total = sum(spmm(mean_adjacency(hg, t, s), x_dict[s].float()) * hg_degree(hg, t, s).unsqueeze(1)
                        for s in sources)
            deg = sum(hg_degree(hg, t, s) for s in sources)
            x_dict[t] = total / deg.clamp_min(1).unsqueeze(1)
            missing.remove(t)
            progress = True
        if not progress:
            raise FeatureError(f"node types {missing} are not connected to any type with features; "
                               f"use method='random'")
    return x_dict
