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
nodes in Python (candidates: :mod:`sgl.models.gsl.walks`; scores: :mod:`sgl.models.gsl.scores`).
Two baselines share the :meth:`learn` API: :class:`~sgl.models.gsl.NoStructureLearning`
(the input graph) and :class:`~sgl.models.gsl.KNNGraph` (a cosine kNN graph of the features,
built with faiss).

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
pre-computed files that are not shipped, so we train the base model ourselves
(:func:`sgl.tasks.structure_learning.learn_structure`) or take ``pseudo_labels=`` from the caller; layers after the first of the official sample draw
from the neighbours proposed by the previous layer's members (``num_samples[l]`` each)
rather than uniformly over the whole union; a node is never its own candidate (the authors'
sample and walk may return to the start node and add a self-loop); deletions and additions
of all nodes are applied at once, additions winning (the authors apply them node by node).


Example:
    >>> import sgl
    >>> from sgl.models.gsl import RWGSL, RWGSLConfig
    >>> from sgl.tasks.structure_learning import learn_structure
    >>> graph = sgl.datasets.load("karate")
    >>> learner = RWGSL(RWGSLConfig(rounds=2, pseudo_epochs=20), seed=0)
    >>> refined = learn_structure(learner, graph)
    >>> refined.num_nodes, refined.is_symmetric()
    (34, True)
    >>> sorted(learner.history[0])
    ['added', 'candidates', 'deleted', 'edges']
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F

from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.models.gsl.config import RWGSLConfig
from sgl.models.gsl.graphs import _contains, _edge_keys, _undirected, _with_node_data, check_gsl_graph
from sgl.models.gsl.scores import _segment_mean, jaccard_pairs, label_propagation, pair_scores
from sgl.models.gsl.walks import candidate_pairs, distinct_layer_samples, random_walks

__all__ = ["RWGSL"]


class RWGSL:
    r"""Random-walk graph structure learning (see the module docstring for the algorithm).

    Args:
        config (RWGSLConfig, optional): hyper-parameters.
        seed (int): seeds the samples, the walks and the pseudo-label model.
        progress (bool): show a progress bar over rounds.

    :meth:`learn` returns the refined graph (symmetric, unweighted, with the input's node
    data) and records per-round statistics in :attr:`history`. It needs pseudo-labels; the
    built-in base model that makes them is trained by
    :func:`sgl.tasks.structure_learning.learn_structure` (models never train themselves).
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

        ``pseudo_labels``: ``[N, C]`` class probabilities or one-hot rows (see
        :func:`sgl.tasks.structure_learning.rwgsl_pseudo_labels` for the built-in base model,
        :func:`sgl.tasks.pseudo_labels.model_pseudo_labels` for a zoo-model ensemble).
        """
        graph = check_gsl_graph(graph, "RWGSL")
        n = graph.num_nodes
        if pseudo_labels is None:
            raise FeatureError("RWGSL.learn needs pseudo_labels=[N, C] class probabilities; "
                               "sgl.tasks.structure_learning.learn_structure(learner, graph) trains the "
                               "built-in base model for them")
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
