r"""RWGSL: random-walk graph structure learning, parameter-free and vectorized.

RWGSL ("Towards Scalable and Efficient Graph Structure Learning", ICDE 2025) edits the
edges of a graph before any GNN is trained on it. Each of ``rounds`` rounds:

1. **Pseudo-labels.** Class probabilities :math:`P` of a quick base model (by default a
   logistic regression on SGC features :math:`\hat A^2 X` trained on the training nodes,
   whose rows are then replaced by the true one-hot labels) are smoothed over the
   *current* graph by label propagation
   :math:`Y \leftarrow (1-\alpha)\hat A Y + \alpha P` for ``lp_layers`` steps, with
   :math:`\hat A = \tilde D^{-1/2}(A+I)\tilde D^{-1/2}`.
2. **Candidates.** For every node :math:`u`, two groups: a layer-wise sample without
   replacement (up to ``num_samples[0]`` distinct neighbours of :math:`u`, then up to
   ``num_samples[l]`` distinct neighbours of layer :math:`l-1`) and the nodes visited by
   ``num_walks`` uniform random walks of ``walk_length`` steps from :math:`u`.
3. **Scores.** For a candidate pair :math:`(u, v)`

   .. math::
       s(u, v) = \tfrac13\left[\operatorname{sgn}(c)\,|c|^{e_1} + J(u,v)^{e_2}
                 + \cos(Y_u, Y_v)^{e_3}\right],

   with :math:`c = \cos(X_u, X_v)` and :math:`J` the Jaccard index of the neighbour sets.
4. **Edits.** With :math:`m_u` the mean score of a group, an existing edge scoring below
   ``low`` :math:`\cdot m_u` is deleted and a non-edge scoring above ``high``
   :math:`\cdot m_u` is added; a walk node is also added when its feature cosine alone
   passes that bar (both directions: the learned graph is undirected).

Every step works on whole arrays of pairs (gathers, ``searchsorted`` membership tests,
segment reductions), processed in blocks of nodes to bound memory: there is no loop over
nodes in Python. Two baselines share the :meth:`learn` API: :class:`NoStructureLearning`
(the input graph) and :class:`KNNGraph` (a cosine kNN graph of the features, built with
faiss).

Two candidate schemes. ``scheme="joint"`` pools each node's current
neighbours, layer-wise samples and walk nodes into one de-duplicated set with one mean, so
every existing edge is re-examined each round. ``scheme="official"`` (the default) follows the authors'
ICDE code (infinity1009/RWGSL ``method.py``): a layer-wise sample without replacement and
the node's own walk are two groups, each judged against its own mean; sampled non-edges are
added above ``high`` x the sample mean, and a walk node is added when
``max(score, feature cosine)`` passes ``high`` x the walk mean (walk entries count with
multiplicity in that mean). With ``hard_pseudo_labels=True`` (the default) the pseudo-labels are one-hot
arg-max rows before label propagation, as the authors propagate class ids.

Differences from the authors' code, all documented choices: their pseudo-labels are
pre-computed files that are not shipped, so we train the base model ourselves (or take
``pseudo_labels=`` from the caller); layers after the first of the official sample draw
from the neighbours proposed by the previous layer's members (``num_samples[l]`` each)
rather than uniformly over the whole union; a node is never its own candidate (the authors'
sample and walk may return to the start node and add a self-loop); deletions and additions
of all nodes are applied at once, additions winning (the authors apply them node by node).

Example:
    >>> import sgl
    >>> from sgl.models.rwgsl import RWGSL, RWGSLConfig
    >>> graph = sgl.datasets.load("karate")
    >>> learner = RWGSL(RWGSLConfig(rounds=2, pseudo_epochs=20), seed=0)
    >>> refined = learner.learn(graph)
    >>> refined.num_nodes, refined.is_symmetric()
    (34, True)
    >>> sorted(learner.history[0])
    ['added', 'candidates', 'deleted', 'edges']
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from numbers import Integral, Real
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.ops import normalized_adjacency, propagate_hops, row_normalize, spmm

__all__ = [
    "RWGSLConfig",
    "RWGSL",
    "KNNGraphConfig",
    "KNNGraph",
    "NoStructureLearning",
    "STRUCTURE_LEARNERS",
    "structure_learner",
    "candidate_pairs",
    "pair_scores",
    "jaccard_pairs",
    "label_propagation",
    "random_walks",
    "distinct_layer_samples",
]


# ---------------------------------------------------------------------------- configs
def _check_int(value: Any, name: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ConfigError(f"RWGSL {name} must be an integer >= {minimum}, got {value!r}")


def _check_real(value: Any, name: str, low: float = -math.inf, high: float = math.inf) -> None:
    if isinstance(value, bool) or not isinstance(value, Real) or not (low <= float(value) <= high):
        raise ConfigError(f"RWGSL {name} must be a number in [{low}, {high}], got {value!r}")


@dataclass
class RWGSLConfig:
    """Hyper-parameters of :class:`RWGSL` (defaults: the authors' ``args.py`` defaults).

    ``exponents`` are :math:`(e_1, e_2, e_3)` for the feature cosine, the neighbourhood
    Jaccard index and the pseudo-label cosine. ``low``/``high`` are relative to each node's
    mean candidate score; ``low <= high`` is required. ``block_nodes`` bounds memory: the
    candidates of that many nodes are generated and scored at once.
    """

    rounds: int = 3
    walk_length: int = 5
    num_walks: int = 1
    num_samples: Tuple[int, ...] = (10, 10, 10)
    high: float = 0.8
    low: float = 0.1
    exponents: Tuple[float, float, float] = (0.5, 0.25, 1.0)
    lp_layers: int = 3
    lp_alpha: float = 0.4
    #: base model for the pseudo-labels: logistic regression on SGC features A^k X
    pseudo_k: int = 2
    pseudo_epochs: int = 100
    pseudo_lr: float = 0.2
    pseudo_weight_decay: float = 5e-5
    #: replace the pseudo-labels of training nodes by their true one-hot labels
    clamp_train_labels: bool = True
    block_nodes: int = 200_000
    #: pairs per block in the feature-cosine gather (bounds the [pairs, d] temporary)
    block_pairs: int = 1 << 20
    #: ``"official"``: the authors' ICDE code's two groups, each with its own mean: a
    #: layer-wise sample without replacement (delete/add as above) and the node's walk (a
    #: multiset; deletes edges below ``low`` x its mean, adds a node when
    #: ``max(score, feature cosine)`` passes ``high`` x its mean); ``"joint"``: one candidate
    #: set per node (current neighbours + samples + walk nodes) with one mean
    scheme: str = "official"
    #: turn the pseudo-labels into one-hot rows of their arg-max before label propagation (the
    #: authors' code propagates one-hot class ids)
    hard_pseudo_labels: bool = True

    def __post_init__(self) -> None:
        self.num_samples = tuple(self.num_samples)
        self.exponents = tuple(self.exponents)
        _check_int(self.rounds, "rounds", 1)
        _check_int(self.walk_length, "walk_length", 0)
        _check_int(self.num_walks, "num_walks", 0)
        for s in self.num_samples:
            _check_int(s, "num_samples entry", 0)
        if len(self.exponents) != 3:
            raise ConfigError(f"RWGSL exponents must hold 3 numbers (feature, jaccard, label), got {self.exponents!r}")
        for e in self.exponents:
            _check_real(e, "exponent", 0.0)
        _check_real(self.low, "low", 0.0)
        _check_real(self.high, "high", 0.0)
        if self.low > self.high:
            raise ConfigError(
                f"RWGSL thresholds need low <= high, got low={self.low} > high={self.high}: an edge could be "
                f"both deleted and added; swap them or lower low"
            )
        _check_int(self.lp_layers, "lp_layers", 0)
        _check_real(self.lp_alpha, "lp_alpha", 0.0, 1.0)
        _check_int(self.pseudo_k, "pseudo_k", 0)
        _check_int(self.pseudo_epochs, "pseudo_epochs", 1)
        _check_real(self.pseudo_lr, "pseudo_lr", 1e-12)
        _check_real(self.pseudo_weight_decay, "pseudo_weight_decay", 0.0)
        _check_int(self.block_nodes, "block_nodes", 1)
        _check_int(self.block_pairs, "block_pairs", 1)
        if self.scheme not in ("joint", "official"):
            raise ConfigError(f"RWGSL scheme must be 'joint' or 'official', got {self.scheme!r}")
        if not isinstance(self.hard_pseudo_labels, bool):
            raise ConfigError(f"RWGSL hard_pseudo_labels must be True or False, got {self.hard_pseudo_labels!r}")
        if not isinstance(self.clamp_train_labels, bool):
            raise ConfigError(f"RWGSL clamp_train_labels must be True or False, got {self.clamp_train_labels!r}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------- vectorized kernels
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


def _edge_keys(graph: Graph) -> torch.Tensor:
    """Sorted ``dst * N + src`` keys of every edge, for ``searchsorted`` membership tests."""
    n = graph.num_nodes
    return torch.sort(graph.destinations() * n + graph.indices).values


def _contains(sorted_keys: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    if sorted_keys.numel() == 0:
        return torch.zeros(keys.shape, dtype=torch.bool)
    pos = torch.searchsorted(sorted_keys, keys).clamp(max=sorted_keys.numel() - 1)
    return sorted_keys[pos] == keys


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


# ---------------------------------------------------------------------------- validation
def _check_graph(graph: Any, who: str) -> Graph:
    if not isinstance(graph, Graph):
        raise GraphError(f"{who} takes an sgl.data.Graph, got {type(graph).__name__}")
    if graph.x is None:
        raise FeatureError(
            f"{who} needs node features (the feature-cosine term): the graph has no x; set graph.x "
            f"(e.g. one-hot node ids or degrees for a featureless graph)"
        )
    if graph.x.dim() != 2:
        raise FeatureError(f"{who} needs 2-D features [num_nodes, d], got shape {tuple(graph.x.shape)}")
    return graph


def _with_node_data(graph: Graph, edge_index: torch.Tensor) -> Graph:
    return Graph.from_edge_index(edge_index, num_nodes=graph.num_nodes, x=graph.x, y=graph.y,
                                 train_mask=graph.train_mask, val_mask=graph.val_mask, test_mask=graph.test_mask,
                                 name=graph.name)


def _undirected(graph: Graph) -> Graph:
    """Symmetric, de-duplicated, loop-free, unweighted copy (node data kept)."""
    src, dst = graph.edge_index
    keep = src != dst
    n = graph.num_nodes
    keys = torch.unique(torch.cat([dst[keep] * n + src[keep], src[keep] * n + dst[keep]]))
    return _with_node_data(graph, torch.stack([keys % n, keys // n]))


# ---------------------------------------------------------------------------- learners
class RWGSL:
    r"""Random-walk graph structure learning (see the module docstring for the algorithm).

    Args:
        config (RWGSLConfig, optional): hyper-parameters.
        seed (int): seeds the samples, the walks and the pseudo-label model.
        progress (bool): show a progress bar over rounds.

    :meth:`learn` returns the refined graph (symmetric, unweighted, with the input's node
    data) and records per-round statistics in :attr:`history`.
    """

    def __init__(self, config: Optional[RWGSLConfig] = None, seed: int = 0, progress: bool = False) -> None:
        if config is not None and not isinstance(config, RWGSLConfig):
            raise ConfigError(f"RWGSL takes an RWGSLConfig, got {type(config).__name__}")
        self.config = config or RWGSLConfig()
        self.seed = int(seed)
        self.progress = progress
        self.history: List[Dict[str, int]] = []

    def __repr__(self) -> str:
        c = self.config
        return (f"RWGSL(rounds={c.rounds}, walk_length={c.walk_length}, num_samples={c.num_samples}, "
                f"low={c.low}, high={c.high}, exponents={c.exponents})")

    # -- pseudo-labels ------------------------------------------------------------
    def pseudo_labels(self, graph: Graph) -> torch.Tensor:
        """Class probabilities ``[N, C]`` of the base model (logistic regression on ``A^k X``).

        Trained on the training nodes, the epoch with the best validation accuracy is kept
        (training accuracy when there is no validation set).
        """
        cfg = self.config
        if graph.y is None or graph.y.dim() != 1 or graph.y.is_floating_point():
            raise FeatureError("RWGSL's pseudo-labels need integer node labels graph.y "
                               "(or pass pseudo_labels=[N, C] probabilities to learn())")
        if graph.train_mask is None or not bool(graph.train_mask.any()):
            raise FeatureError("RWGSL's pseudo-label model needs training nodes (graph.train_mask); "
                               "or pass pseudo_labels=[N, C] to learn()")
        y = graph.y
        num_classes = int(y.max()) + 1
        gen = torch.Generator().manual_seed(self.seed)
        x = propagate_hops(graph, row_normalize(graph.x.float()), cfg.pseudo_k, progress=False)[-1]
        train = graph.train_mask.nonzero().flatten()
        val = graph.val_mask.nonzero().flatten() if graph.val_mask is not None and bool(graph.val_mask.any()) else train
        weight = torch.zeros(x.size(1), num_classes)
        torch.nn.init.xavier_uniform_(weight, generator=gen)
        weight.requires_grad_(True)
        bias = torch.zeros(num_classes, requires_grad=True)
        opt = torch.optim.Adam([weight, bias], lr=cfg.pseudo_lr, weight_decay=cfg.pseudo_weight_decay)
        best, best_params = -1.0, None
        x_val, y_val = x[val], y[val]
        for _ in range(cfg.pseudo_epochs):
            opt.zero_grad()
            loss = F.cross_entropy(x[train] @ weight + bias, y[train])
            loss.backward()
            opt.step()
            with torch.no_grad():
                acc = float(((x_val @ weight + bias).argmax(1) == y_val).float().mean())
                if acc > best:
                    best, best_params = acc, (weight.detach().clone(), bias.detach().clone())
        with torch.no_grad():
            probs = torch.softmax(x @ best_params[0] + best_params[1], dim=1)
        if cfg.clamp_train_labels:
            probs[train] = F.one_hot(y[train], num_classes).float()
        return probs

    # -- one round -----------------------------------------------------------------
    def _scores(self, graph: Graph, u: torch.Tensor, v: torch.Tensor, xn: torch.Tensor, smooth: torch.Tensor,
                keys: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """RWGSL scores of the pairs ``(u, v)`` and their raw feature cosines."""
        cfg = self.config
        fcos = torch.empty(u.numel())
        lcos = torch.empty(u.numel())
        for s in range(0, u.numel(), cfg.block_pairs):
            a, b = u[s:s + cfg.block_pairs], v[s:s + cfg.block_pairs]
            fcos[s:s + cfg.block_pairs] = (xn[a] * xn[b]).sum(1)
            lcos[s:s + cfg.block_pairs] = (smooth[a] * smooth[b]).sum(1)
        fcos = fcos.clamp(-1, 1)
        return pair_scores(fcos, jaccard_pairs(graph, u, v, keys), lcos.clamp(0, 1), cfg.exponents), fcos

    def _group_edits(self, graph, nodes, u, v, xn, smooth, keys, walk_rule=False):
        """Deletions and additions among the pairs ``(u, v)``, judged against each node's mean score
        over this group; with ``walk_rule`` a pair is also added when its feature cosine passes the bar."""
        cfg = self.config
        score, fcos = self._scores(graph, u, v, xn, smooth, keys)
        local = u - int(nodes[0])
        mean = _segment_mean(score, local, nodes.numel())[local]
        is_edge = _contains(keys, u * graph.num_nodes + v)
        drop = is_edge & (score < cfg.low * mean)
        add = ~is_edge & ((torch.maximum(score, fcos) if walk_rule else score) > cfg.high * mean)
        return torch.stack([u[drop], v[drop]]), torch.stack([u[add], v[add]])

    def _edits_joint(self, graph, nodes, xn, smooth, keys, gen):
        cfg = self.config
        u, v = candidate_pairs(graph, nodes, cfg.num_samples, cfg.walk_length, cfg.num_walks, gen)
        if u.numel() == 0:
            return 0, None, None
        return (u.numel(), *self._group_edits(graph, nodes, u, v, xn, smooth, keys))

    def _edits_official(self, graph, nodes, xn, smooth, keys, gen):
        cfg = self.config
        su, sv = distinct_layer_samples(graph, nodes, cfg.num_samples, gen)
        walks = random_walks(graph, nodes, cfg.walk_length, cfg.num_walks, gen)
        wu = nodes.view(-1, 1).expand_as(walks).reshape(-1)
        wv = walks.reshape(-1)
        ok = (wv >= 0) & (wv != wu)
        groups = [(su, sv, False), (wu[ok], wv[ok], True)]
        edits = [self._group_edits(graph, nodes, u, v, xn, smooth, keys, walk) for u, v, walk in groups if u.numel()]
        if not edits:
            return 0, None, None
        total = su.numel() + int(ok.sum())
        return total, torch.cat([d for d, _ in edits], dim=1), torch.cat([a for _, a in edits], dim=1)

    def _round(self, graph: Graph, probs: torch.Tensor, xn: torch.Tensor, gen: torch.Generator) -> Tuple[Graph, Dict[str, int]]:
        cfg = self.config
        n = graph.num_nodes
        smooth = F.normalize(label_propagation(graph, probs, cfg.lp_layers, cfg.lp_alpha), dim=1)
        keys = _edge_keys(graph)
        edits = self._edits_official if cfg.scheme == "official" else self._edits_joint
        deleted, added = [], []
        total = 0
        for lo in range(0, n, cfg.block_nodes):
            nodes = torch.arange(lo, min(n, lo + cfg.block_nodes))
            count, drop, add = edits(graph, nodes, xn, smooth, keys, gen)
            if count == 0:
                continue
            total += count
            deleted.append(drop)
            added.append(add)
        if total == 0:
            raise GraphError(
                "RWGSL found no candidate pairs: the graph has no edges, so neither neighbours, samples nor "
                "random walks propose any; start from a graph with edges (e.g. a KNNGraph of the features)"
            )
        deleted_pairs = torch.cat(deleted, dim=1)
        added_pairs = torch.cat(added, dim=1)
        gone = torch.cat([deleted_pairs[0] * n + deleted_pairs[1], deleted_pairs[1] * n + deleted_pairs[0]])
        kept = keys[~torch.isin(keys, gone)] if gone.numel() else keys
        new = torch.cat([added_pairs[0] * n + added_pairs[1], added_pairs[1] * n + added_pairs[0]])
        final = torch.unique(torch.cat([kept, new]))
        refined = _with_node_data(graph, torch.stack([final % n, final // n]))
        # counts of undirected edits: a pair proposed from both endpoints counts once
        stats = {"candidates": total,
                 "deleted": int(torch.unique(torch.minimum(deleted_pairs[0], deleted_pairs[1]) * n
                                             + torch.maximum(deleted_pairs[0], deleted_pairs[1])).numel()),
                 "added": int(torch.unique(torch.minimum(added_pairs[0], added_pairs[1]) * n
                                           + torch.maximum(added_pairs[0], added_pairs[1])).numel()),
                 "edges": refined.num_edges}
        return refined, stats

    def learn(self, graph: Graph, pseudo_labels: Optional[torch.Tensor] = None) -> Graph:
        """Run ``rounds`` rounds of structure refinement; return the refined graph.

        ``pseudo_labels`` (``[N, C]`` class probabilities or one-hot rows) replaces the
        built-in base model.
        """
        graph = _check_graph(graph, "RWGSL")
        n = graph.num_nodes
        if pseudo_labels is None:
            probs = self.pseudo_labels(graph)
        else:
            probs = torch.as_tensor(pseudo_labels).float()
            if probs.dim() != 2 or probs.size(0) != n:
                raise FeatureError(f"pseudo_labels must have shape [num_nodes={n}, num_classes], "
                                   f"got {tuple(probs.shape)}")
            if not bool(torch.isfinite(probs).all()) or bool((probs < 0).any()):
                raise FeatureError("pseudo_labels must be finite and non-negative (class probabilities)")
        if self.config.hard_pseudo_labels:
            probs = F.one_hot(probs.argmax(1), probs.size(1)).float()
        xn = F.normalize(graph.x.float(), dim=1)
        current = _undirected(graph)
        gen = torch.Generator().manual_seed(self.seed)
        self.history = []
        rounds = range(self.config.rounds)
        if self.progress:
            from tqdm.auto import tqdm

            rounds = tqdm(rounds, desc="RWGSL rounds", leave=False, disable=None)
        for _ in rounds:
            current, stats = self._round(current, probs, xn, gen)
            self.history.append(stats)
        return current


@dataclass
class KNNGraphConfig:
    """Hyper-parameters of :class:`KNNGraph`.

    ``k`` neighbours per node by cosine similarity of the features; exact search
    (``faiss.IndexFlatIP``) up to ``exact_max_nodes`` nodes, an inverted-file index with
    ``nlist = 4 sqrt(N)`` lists and ``nprobe`` probes above. ``combine="replace"`` returns
    the kNN graph alone, ``"union"`` adds its edges to the input graph.
    """

    k: int = 10
    exact_max_nodes: int = 50_000
    nprobe: int = 8
    combine: str = "replace"
    train_sample: int = 100_000

    def __post_init__(self) -> None:
        for name in ("k", "exact_max_nodes", "nprobe", "train_sample"):
            _check_int(getattr(self, name), name, 1)
        if self.combine not in ("replace", "union"):
            raise ConfigError(f"KNNGraph combine must be 'replace' or 'union', got {self.combine!r}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class KNNGraph:
    """Baseline structure learner: a symmetric cosine kNN graph of the node features (faiss).

    Example:
        >>> import sgl
        >>> from sgl.models.rwgsl import KNNGraph, KNNGraphConfig
        >>> graph = sgl.datasets.load("karate")
        >>> knn = KNNGraph(KNNGraphConfig(k=3)).learn(graph)
        >>> knn.is_symmetric(), knn.num_edges >= 34 * 3
        (True, True)
    """

    def __init__(self, config: Optional[KNNGraphConfig] = None, seed: int = 0, progress: bool = False) -> None:
        if config is not None and not isinstance(config, KNNGraphConfig):
            raise ConfigError(f"KNNGraph takes a KNNGraphConfig, got {type(config).__name__}")
        self.config = config or KNNGraphConfig()
        self.seed = int(seed)
        self.history: List[Dict[str, int]] = []

    def __repr__(self) -> str:
        return f"KNNGraph(k={self.config.k}, combine={self.config.combine!r})"

    def learn(self, graph: Graph, pseudo_labels: Optional[torch.Tensor] = None) -> Graph:
        import faiss

        graph = _check_graph(graph, "KNNGraph")
        cfg = self.config
        n = graph.num_nodes
        if n < 2:
            raise GraphError("KNNGraph needs at least 2 nodes")
        k = min(cfg.k, n - 1)
        x = np.ascontiguousarray(F.normalize(graph.x.float(), dim=1).numpy())
        d = x.shape[1]
        if n <= cfg.exact_max_nodes:
            index = faiss.IndexFlatIP(d)
        else:
            nlist = int(4 * math.sqrt(n))
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
            rng = np.random.default_rng(self.seed)
            sample = x[rng.choice(n, size=min(n, max(cfg.train_sample, 40 * nlist)), replace=False)]
            index.train(sample)
            index.nprobe = cfg.nprobe
        index.add(x)
        _, neighbors = index.search(x, k + 1)  # the node itself is usually its own best match
        src = torch.from_numpy(neighbors).reshape(-1)
        dst = torch.arange(n).repeat_interleave(k + 1)
        keep = (src >= 0) & (src != dst)
        edges = torch.stack([src[keep], dst[keep]])
        if cfg.combine == "union":
            edges = torch.cat([edges, graph.edge_index], dim=1)
        out = _undirected(_with_node_data(graph, edges))
        self.history = [{"edges": out.num_edges}]
        return out


class NoStructureLearning:
    """Baseline: the input graph, made symmetric, de-duplicated and loop-free (no learning).

    Example:
        >>> import sgl
        >>> graph = sgl.datasets.load("karate")
        >>> NoStructureLearning().learn(graph).num_edges == graph.num_edges
        True
    """

    def __init__(self, config: Any = None, seed: int = 0, progress: bool = False) -> None:
        self.config = config
        self.history: List[Dict[str, int]] = []

    def __repr__(self) -> str:
        return "NoStructureLearning()"

    def learn(self, graph: Graph, pseudo_labels: Optional[torch.Tensor] = None) -> Graph:
        if not isinstance(graph, Graph):
            raise GraphError(f"NoStructureLearning takes an sgl.data.Graph, got {type(graph).__name__}")
        return _undirected(graph)


#: name -> (learner class, config dataclass or None, description)
STRUCTURE_LEARNERS: Dict[str, Tuple[type, Optional[type], str]] = {
    "rwgsl": (RWGSL, RWGSLConfig, "RWGSL: random-walk candidates, 3-term similarity, relative thresholds"),
    "knn": (KNNGraph, KNNGraphConfig, "cosine kNN graph of the features (faiss)"),
    "none": (NoStructureLearning, None, "no structure learning: the input graph"),
}


def structure_learner(name: str, seed: int = 0, progress: bool = False, **options: Any) -> Any:
    """Build structure learner ``name`` (``rwgsl``, ``knn``, ``none``) with config ``options``.

    Example:
        >>> structure_learner("rwgsl", rounds=2).config.rounds
        2
    """
    key = str(name).lower()
    if key not in STRUCTURE_LEARNERS:
        raise ConfigError(f"unknown structure learner {name!r}; available: {', '.join(sorted(STRUCTURE_LEARNERS))}")
    cls, config_cls, _ = STRUCTURE_LEARNERS[key]
    if config_cls is None:
        if options:
            raise ConfigError(f"structure learner {name!r} takes no options, got {sorted(options)}")
        return cls(seed=seed, progress=progress)
    valid = set(config_cls.__dataclass_fields__)
    unknown = set(options) - valid
    if unknown:
        raise ConfigError(f"unknown option(s) {sorted(unknown)} for {name!r}; valid: {sorted(valid)}")
    return cls(config_cls(**options), seed=seed, progress=progress)
