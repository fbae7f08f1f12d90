r"""Graph condensation: a small synthetic :class:`~sgl.data.Graph` that trains models like the real one.

Methods (``method=``):

* ``"gcond"`` -- GCond (Jin et al., ICLR 2022): gradient matching of a linear SGC-style model
  between the real training nodes and the synthetic graph, per class, for a fresh random
  model every epoch; synthetic features :math:`X'` and a pair-MLP adjacency
  :math:`A' = \sigma(\tfrac12(\mathrm{MLP}_\phi([x'_i;x'_j]) + \mathrm{MLP}_\phi([x'_j;x'_i])))`
  are learned (:mod:`sgl.tasks.condense_gcond`).
* ``"doscond"`` -- DosCond (Jin et al., KDD 2022): the one-step variant (one match per fresh
  model, no inner training).
* ``"kmeans"`` -- training-free (CGC-style class partition, Gao et al. WWW 2025, without its
  least-squares refinements): per class, k-means centres of the propagated features
  :math:`\tfrac13(X + \hat AX + \hat A^2X)` of its training nodes; no edges (CGC-X).

The class budget follows GCond: class :math:`c` gets :math:`\max(\lfloor N' n_c / n\rfloor, 1)`
nodes for :math:`n_c` of the :math:`n` training nodes, the largest class the remainder. The
result has exactly ``nodes`` nodes, all in ``train_mask``, and the metadata
``condensed_from`` (the source dataset), which ``sgl train --dataset file:cond.pt`` uses to
validate and test on the real graph (:mod:`sgl.tasks.condense_eval`).

Example:
    >>> import sgl
    >>> g = sgl.datasets.load("karate")
    >>> small = condense(g, nodes=4, method="kmeans", seed=0)
    >>> small.num_nodes, int(small.train_mask.sum()), small.y.tolist()
    (4, 4, [0, 0, 1, 1])
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

import torch

from sgl._checks import check_choice, check_int, check_real
from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError
from sgl.ops import row_normalize
from sgl.tasks.condense_hops import torch_hops
from sgl.tasks.stats import seed_everything

__all__ = ["CondenseConfig", "condense", "class_budget", "CONDENSE_METHODS"]

CONDENSE_METHODS = ("gcond", "doscond", "kmeans")


@dataclass
class CondenseConfig:
    """Settings of :func:`condense`: GCond's Cora script (600 epochs, outer 20, inner 15, lr 1e-4; see
    docs/acceleration.md, ~4.5 CPU-minutes on Cora -> 70 nodes)."""

    method: str = "gcond"
    epochs: int = 600
    outer: int = 20
    inner: int = 15
    #: None: GCond's 1e-4 for gcond, DosCond's Cora 1e-3 for doscond
    lr_feat: Optional[float] = None
    lr_adj: Optional[float] = None
    lr_model: float = 0.01
    hidden: int = 128
    k: int = 2
    #: edges of the learned adjacency kept in the output graph (GCond's 0.01 for transfer)
    threshold: float = 0.01
    normalize_features: bool = True

    def __post_init__(self) -> None:
        check_choice(self.method, "condensation method", CONDENSE_METHODS)
        for name in ("epochs", "outer", "hidden", "k"):
            check_int(getattr(self, name), name, minimum=1)
        check_int(self.inner, "inner", minimum=0)
        for name in ("lr_feat", "lr_adj"):
            if getattr(self, name) is None:
                setattr(self, name, 1e-3 if self.method == "doscond" else 1e-4)
        for name in ("lr_feat", "lr_adj", "lr_model"):
            check_real(getattr(self, name), name, 0.0, open_low=True)
        check_real(self.threshold, "threshold", 0.0, 1.0, open_high=True)
        if self.method == "doscond":
            self.outer, self.inner = 1, 0

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def class_budget(labels: torch.Tensor, nodes: int, num_classes: int) -> torch.Tensor:
    """Synthetic nodes per class (GCond's rule; sums to ``nodes``)."""
    counts = torch.bincount(labels.cpu(), minlength=num_classes)
    present = counts > 0
    if nodes < int(present.sum()):
        raise ConfigError(f"cannot condense to {nodes} nodes: the training set has {int(present.sum())} classes and "
                          f"each needs at least one node; ask for --nodes >= {int(present.sum())}")
    budget = torch.where(present, torch.clamp((counts.double() * nodes / counts.sum()).floor().long(), min=1),
                         torch.zeros_like(counts))
    largest = int(counts.argmax())
    budget[largest] += nodes - int(budget.sum())
    if int(budget[largest]) < 1:
        raise ConfigError(f"cannot split {nodes} nodes over the classes with GCond's rule; ask for more nodes")
    return budget


def _features(graph: Any, config: CondenseConfig) -> torch.Tensor:
    if graph.x is None:
        raise FeatureError("condensation needs node features (graph.x)")
    x = graph.x.float()
    return row_normalize(x) if config.normalize_features else x


def condense(graph: Any, nodes: int, method: Optional[str] = None, seed: int = 0,
             config: Optional[CondenseConfig] = None, source: Optional[Dict[str, Any]] = None) -> Graph:
    """Condense ``graph``'s training nodes into a ``nodes``-node :class:`~sgl.data.Graph` (deterministic per seed).

    ``source`` (e.g. ``{"dataset": "cora", "root": ...}``) is stored as ``condensed_from`` so the
    real graph can be reloaded for validation and test; ``graph.name`` is used when it is None.
    """
    config = config or CondenseConfig(**({"method": method} if method else {}))
    if method is not None and method != config.method:
        raise ConfigError(f"method={method!r} disagrees with config.method={config.method!r}; give one of them")
    nodes = check_int(nodes, "--nodes (condensed graph size)", minimum=1)
    if not isinstance(graph, Graph) or graph.y is None or graph.train_mask is None:
        raise FeatureError("condensation needs a Graph with labels (graph.y) and a train_mask")
    train = graph.train_mask.nonzero().flatten() if graph.train_mask.dtype == torch.bool else graph.train_mask
    labels = graph.y[train]
    budget = class_budget(labels, nodes, graph.num_classes)
    seed_everything(seed)
    start = time.perf_counter()
    x = _features(graph, config)
    y_syn = torch.repeat_interleave(torch.arange(budget.numel()), budget).to(graph.y.device)
    if config.method == "kmeans":
        x_syn, adj = _kmeans_centres(graph, x, train, labels, budget, config, seed), None
    else:
        from sgl.tasks.condense_gcond import match_gradients

        x_syn, adj = match_gradients(graph, x, train, labels, y_syn, budget, config, seed)
    if config.normalize_features and bool((x_syn >= 0).all()):
        x_syn = row_normalize(x_syn)  # rows sum to 1, so a zoo model's own row normalisation leaves them as learned
    out = _as_graph(x_syn, y_syn, adj, config.threshold)
    out.condensed_from = {**(source or {"dataset": graph.name}), "method": config.method, "seed": int(seed),
                          "nodes": int(nodes), "condense_time_s": time.perf_counter() - start,
                          "config": config.to_dict()}
    return out


def _lloyd(rows: torch.Tensor, k: int, generator: torch.Generator, iters: int = 50) -> torch.Tensor:
    """k-means centres (k-means++ seeding from ``generator``, then Lloyd steps) of ``rows``, on their device."""
    first = int(torch.randint(rows.size(0), (1,), generator=generator))
    centres = rows[first:first + 1]
    for _ in range(1, k):  # k-means++: next centre drawn with probability ~ squared distance
        dist = torch.cdist(rows, centres).min(dim=1).values.pow(2)
        probs = (dist / dist.sum()).cpu() if float(dist.sum()) > 0 else torch.ones(rows.size(0)) / rows.size(0)
        pick = int(torch.multinomial(probs, 1, generator=generator))
        centres = torch.cat([centres, rows[pick:pick + 1]])
    for _ in range(iters):
        assign = torch.cdist(rows, centres).argmin(dim=1)
        sums = torch.zeros_like(centres).index_add_(0, assign, rows)
        counts = torch.bincount(assign, minlength=k).unsqueeze(1).to(rows.dtype)
        updated = torch.where(counts > 0, sums / counts.clamp_min(1), centres)
        if torch.equal(updated, centres):
            break
        centres = updated
    return centres


def _kmeans_centres(graph: Any, x: torch.Tensor, train: torch.Tensor, labels: torch.Tensor, budget: torch.Tensor,
                    config: CondenseConfig, seed: int) -> torch.Tensor:
    hops = torch_hops(graph, x, config.k)
    h = torch.stack(hops).mean(dim=0)[train]
    generator = torch.Generator().manual_seed(int(seed))
    return torch.cat([_lloyd(h[labels == c], size, generator) for c, size in enumerate(budget.tolist()) if size > 0])


def _as_graph(x: torch.Tensor, y: torch.Tensor, adj: Optional[torch.Tensor], threshold: float) -> Graph:
    n = x.size(0)
    if adj is None:
        edge_index = torch.zeros(2, 0, dtype=torch.long, device=x.device)
        weight = None
    else:
        adj = adj.detach().clone()
        adj.fill_diagonal_(0)
        keep = adj > threshold
        edge_index = keep.nonzero().T.contiguous()
        weight = adj[keep]
    return Graph.from_edge_index(edge_index, num_nodes=n, edge_weight=weight, x=x.detach().clone(), y=y.clone(),
                                 train_mask=torch.ones(n, dtype=torch.bool, device=x.device), name="condensed")
