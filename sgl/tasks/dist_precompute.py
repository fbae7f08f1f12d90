"""The SGAP precompute of one rank: the whole graph (``"local"``) or its partition (``"distributed"``).

:func:`precompute_features` runs on every rank of a job, before :func:`sgl.tasks.ddp.train_ddp`:

* ``"local"``: ``model.precompute(graph)`` -- every rank propagates the whole graph (small
  graphs: no communication, every rank holds every node's row);
* ``"distributed"``: rank ``r`` keeps its piece of the graph (:func:`sgl.ops.local_partition`,
  METIS or ranges) and propagates with :func:`sgl.ops.dist_propagate_hops`, exchanging only halo
  rows per hop; it holds the rows of the nodes it owns, then trains on its own training nodes.

The distributed path computes what the model's own ``precompute`` computes, from the same
operators, on the rank's rows: the hops of the model's graph operator over its (row-normalised)
features, combined by a parameter-free message operator right away (per node, so per rank) or
kept for a learnable one; GAMLP adds its label input (``label_hops`` steps of neighbour mean
over the training one-hots). Every SGAP zoo model (``sgc``, ``sign``, ``s2gc``, ``gbp``,
``appnp``, ``nafs``, ``pasca-v1..v3``, ``sgap``) and ``gamlp`` have it.

Example (one process: the whole graph is rank 0's piece, so both modes agree):
    >>> import sgl, torch
    >>> from sgl.models import SIGN
    >>> g = sgl.datasets.load("karate")
    >>> model = SIGN(g.num_features, g.num_classes)
    >>> dist = precompute_features(model, g, "distributed")
    >>> local = precompute_features(model, g, "local")
    >>> torch.allclose(dist.features.data, local.features.data, atol=1e-6), dist.nodes.numel()
    (True, 34)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from sgl import comm
from sgl.errors import ConfigError, FeatureError
from sgl.models.features import NodeFeatures

__all__ = ["PRECOMPUTE", "RankFeatures", "precompute_features"]

PRECOMPUTE = ("local", "distributed")


@dataclass
class RankFeatures:
    """One rank's precomputed rows: ``features`` of ``nodes`` (``None``: every node, in order);
    ``halo``: what the distributed propagation exchanged (:class:`sgl.ops.HaloStats`, else ``None``)."""

    features: NodeFeatures
    nodes: Optional[torch.Tensor] = None
    halo: Any = None


def precompute_features(model: Any, graph: Any, mode: str = "local", *, partition: str = "metis",
                        cache_dir: Optional[str] = None, progress: bool = False,
                        timeout: Optional[float] = None) -> RankFeatures:
    """This rank's precomputed rows of ``model`` on ``graph`` (every rank loads the whole graph).

    Args:
        mode: ``"local"`` or ``"distributed"`` (see the module docstring).
        partition: ``"metis"`` or ``"range"`` (distributed mode; the same split on every rank).
        cache_dir, progress: passed to ``model.precompute`` (local mode).
        timeout: seconds each halo exchange may wait (``None``: :func:`sgl.comm.init`'s).
    """
    if mode not in PRECOMPUTE:
        raise ConfigError(f"precompute must be one of {PRECOMPUTE}, got {mode!r}")
    if mode == "local":
        return RankFeatures(model.precompute(graph, cache_dir=cache_dir, progress=progress))
    if cache_dir is not None:
        raise ConfigError("cache_dir caches the whole-graph precompute; precompute='distributed' keeps only this "
                          "rank's rows, so remove cache_dir (or use precompute='local')")
    from sgl.models import GAMLP, SGAPModel
    from sgl.ops import dist_propagate_hops, local_partition, row_normalize

    if isinstance(model, SGAPModel):
        x = model.prepare_features(graph, None)
    elif isinstance(model, GAMLP):
        if graph.x is None:
            raise FeatureError("the graph has no node features (graph.x); GAMLP propagates them")
        x = row_normalize(graph.x) if model.config.normalize_features else graph.x
    else:
        raise ConfigError(f"precompute='distributed' propagates the hops of SGAP models and GAMLP, not "
                          f"{type(model).__name__}; use precompute='local'")
    part = local_partition(graph, comm.get_rank(), comm.get_world_size(), partition, x=x)
    out = dist_propagate_hops(part, model.k, model.graph_op, timeout=timeout)
    hops = list(out.hops)
    if isinstance(model, SGAPModel):
        features = NodeFeatures(hops if model.message_op.learnable else model.message_op(hops))
    elif model.label_mlp is None:
        features = NodeFeatures(hops)
    else:
        from sgl.models.gamlp import train_label_matrix
        from sgl.ops.graph_ops import NormalizedAdjacency

        # GAMLP's propagate_labels: label_hops steps of D^-1 A (no self loops); the last one is the input
        labels = train_label_matrix(graph)[part.nodes]
        mean = NormalizedAdjacency(r=0.0, self_loops=False)
        label = dist_propagate_hops(part, model.config.label_hops, mean, x=labels, timeout=timeout).hops[-1]
        features = NodeFeatures(hops + [label])
    return RankFeatures(features, out.nodes, out.stats)
