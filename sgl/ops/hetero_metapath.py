r"""SeHGNN-style metapath precomputation: mean aggregation along every metapath up to length k.

A metapath is a tuple of node types starting at the target, e.g. ``("paper", "author",
"paper")``; its feature is

.. math:: X_P = \hat A_{t_0 t_1} \hat A_{t_1 t_2} \cdots \hat A_{t_{L-1} t_L} X_{t_L},

with the mean adjacencies :math:`\hat A` of :func:`sgl.ops.hetero.mean_adjacency` (relations in
both directions). All metapaths are computed at once by dynamic programming from the end
type, as SeHGNN does, skipping prefixes that cannot reach the target in the hops left.
Label features (SeHGNN's label propagation, GAMLP's label input on ogbn-mag) propagate a
``[n_target, C]`` label matrix along target-to-target metapaths; the node's own label coming
back along a metapath of length 1 or 2 (the diagonal of :math:`\hat A_P`) is removed.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from sgl._checks import check_int
from sgl.errors import FeatureError, GraphError
from sgl.ops.graph_ops import spmm
from sgl.ops.hetero import mean_adjacency, type_neighbours

__all__ = ["enumerate_metapaths", "check_metapath", "metapath_features", "metapath_label_features",
           "metapath_name"]

Metapath = Tuple[str, ...]


def metapath_name(path: Sequence[str]) -> str:
    return "-".join(path)


def _distances(hg: Any, target: str) -> Dict[str, int]:
    neighbours = type_neighbours(hg)
    dist = {target: 0}
    queue = deque([target])
    while queue:
        t = queue.popleft()
        for s in neighbours[t]:
            if s not in dist:
                dist[s] = dist[t] + 1
                queue.append(s)
    return dist


def enumerate_metapaths(hg: Any, k: int, end_types: Optional[Sequence[str]] = None,
                        target: Optional[str] = None) -> List[Metapath]:
    """Every metapath from the target of length ``0..k`` (length = number of hops) that ends at
    one of ``end_types`` (default: every type), in breadth-first order.

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"p": 2, "a": 1}, {("a", "w", "p"): torch.tensor([[0], [1]])}, target="p")
        >>> [metapath_name(m) for m in enumerate_metapaths(g, 2)]
        ['p', 'p-a', 'p-a-p']
    """
    check_int(k, "k", 0)
    target = target or hg.require_target()
    neighbours = type_neighbours(hg)
    ends = set(hg.node_types if end_types is None else end_types)
    out, level = [], [(target,)]
    for _ in range(k + 1):
        out.extend(p for p in level if p[-1] in ends)
        level = [p + (s,) for p in level for s in neighbours[p[-1]]]
    return out


def check_metapath(hg: Any, path: Sequence[str], target: Optional[str] = None) -> Metapath:
    """``path`` as a tuple after checking it starts at the target, names known types and connects."""
    target = target or hg.require_target()
    path = tuple(path)
    if not path:
        raise GraphError("a metapath names at least one node type (the target)")
    for t in path:
        hg.check_node_type(t)
    if path[0] != target:
        raise GraphError(f"metapath {metapath_name(path)} must start at the target type {target!r}")
    neighbours = type_neighbours(hg)
    for a, b in zip(path, path[1:]):
        if b not in neighbours[a]:
            raise GraphError(f"metapath {metapath_name(path)} does not connect: no relation joins {a!r} and {b!r} "
                             f"(relations: {hg.edge_types})")
    return path


@torch.no_grad()
def metapath_features(hg: Any, k: int, x_dict: Optional[Dict[str, torch.Tensor]] = None,
                      metapaths: Optional[Sequence[Sequence[str]]] = None,
                      progress: bool = False) -> Dict[Metapath, torch.Tensor]:
    """``{metapath: [n_target, d_end]}`` for every metapath of length ``<= k`` ending at a
    featured type (or for the given ``metapaths``, each checked; a featureless end is an error).

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"p": 2, "a": 1}, {("a", "w", "p"): torch.tensor([[0, 0], [0, 1]])},
        ...     x_dict={"p": torch.tensor([[1.0], [3.0]]), "a": torch.tensor([[5.0]])}, target="p")
        >>> {metapath_name(m): v.view(-1).tolist() for m, v in metapath_features(g, 2).items()}
        {'p': [1.0, 3.0], 'p-a': [5.0, 5.0], 'p-a-p': [2.0, 2.0]}
    """
    target = hg.require_target()
    x_dict = dict(hg.x_dict if x_dict is None else x_dict)
    if metapaths is None:
        wanted = enumerate_metapaths(hg, k, end_types=list(x_dict), target=target)
    else:
        wanted = [check_metapath(hg, p, target) for p in metapaths]
        for p in wanted:
            if p[-1] not in x_dict:
                raise FeatureError(f"metapath {metapath_name(p)} ends at {p[-1]!r}, which has no features; fill "
                                   f"them first (sgl.ops.fill_featureless)")
    if not wanted:
        raise FeatureError("no metapath ends at a node type with features")
    # suffixes needed: every tail of every wanted metapath, computed shortest first
    needed = sorted({p[i:] for p in wanted for i in range(len(p))}, key=len)
    adjs: Dict[Tuple[str, str], torch.Tensor] = {}
    feats: Dict[Metapath, torch.Tensor] = {}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(needed), desc="metapaths", leave=False)
    for suffix in needed:
        if len(suffix) == 1:
            feats[suffix] = x_dict[suffix[0]].float()
        else:
            pair = (suffix[0], suffix[1])
            if pair not in adjs:
                adjs[pair] = mean_adjacency(hg, *pair)
            feats[suffix] = spmm(adjs[pair], feats[suffix[1:]])
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return {p: feats[p] for p in wanted}


def _coo(adj: torch.Tensor) -> torch.Tensor:
    """A coalesced COO copy of a CSR matrix (CSR -> COO conversion may keep multi-edge duplicates
    while flagging the result as coalesced, so the COO tensor is rebuilt from scratch)."""
    crow, col = adj.crow_indices(), adj.col_indices()
    row = torch.repeat_interleave(torch.arange(adj.size(0)), crow[1:] - crow[:-1])
    return torch.sparse_coo_tensor(torch.stack([row, col]), adj.values(), adj.shape).coalesce()


def _diagonal(hg: Any, path: Metapath) -> Optional[torch.Tensor]:
    """Diagonal of the metapath's mean adjacency for lengths 1 and 2 (``None`` beyond)."""
    if len(path) == 2:
        adj = _coo(mean_adjacency(hg, path[0], path[1]))
        i = adj.indices()
        on = i[0] == i[1]
        diag = torch.zeros(adj.size(0))
        return diag.index_add_(0, i[0][on], adj.values()[on])
    if len(path) == 3:
        first = _coo(mean_adjacency(hg, path[0], path[1]))
        back = _coo(mean_adjacency(hg, path[1], path[2]))
        # diag_t = sum_x A1[t, x] * A2[x, t]: match A1's (t, x) entries with A2's (x, t) ones by key
        width = first.size(1)
        key1 = first.indices()[0] * width + first.indices()[1]
        key2 = back.indices()[1] * width + back.indices()[0]
        order = torch.argsort(key2)
        key2, val2 = key2[order], back.values()[order]
        pos = torch.searchsorted(key2, key1).clamp_max(max(key2.numel() - 1, 0))
        hit = key2.numel() > 0 and (key2[pos] == key1)
        diag = torch.zeros(first.size(0))
        if key2.numel() == 0:
            return diag
        return diag.index_add_(0, first.indices()[0][hit], first.values()[hit] * val2[pos][hit])
    return None


@torch.no_grad()
def metapath_label_features(hg: Any, label_matrix: torch.Tensor, k: int,
                            metapaths: Optional[Sequence[Sequence[str]]] = None,
                            remove_self: bool = True) -> Dict[Metapath, torch.Tensor]:
    """``{metapath: [n_target, C]}``: ``label_matrix`` (training one-hots, zeros elsewhere)
    propagated along every target-to-target metapath of length ``1..k`` (or ``metapaths``).

    With ``remove_self`` the share of a node's own label that returns to it along a metapath of
    length 1 or 2 is subtracted, so training labels do not leak into their own input.
    """
    target = hg.require_target()
    n = hg.num_nodes_dict[target]
    if label_matrix.dim() != 2 or label_matrix.size(0) != n:
        raise FeatureError(f"label_matrix must be [{n}, num_classes] (one row per {target!r} node), "
                           f"got {tuple(label_matrix.shape)}")
    if metapaths is None:
        paths = [p for p in enumerate_metapaths(hg, k, end_types=[target], target=target) if len(p) > 1]
    else:
        paths = [check_metapath(hg, p, target) for p in metapaths]
        bad = [metapath_name(p) for p in paths if p[-1] != target or len(p) < 2]
        if bad:
            raise GraphError(f"label metapaths go from the target back to it, got {bad}")
    out = metapath_features(hg, k, {**hg.x_dict, target: label_matrix.float()}, metapaths=paths)
    if remove_self:
        for p in paths:
            diag = _diagonal(hg, p)
            if diag is not None:
                out[p] = out[p] - diag.unsqueeze(1) * label_matrix.float()
    return out
