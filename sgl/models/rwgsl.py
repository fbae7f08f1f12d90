"""Backward-compatible path of :mod:`sgl.models.gsl` (RWGSL, its kernels, the kNN/none baselines).

RWGSL's pseudo-label model (``RWGSL.pseudo_labels``) is trained by a task now:
:func:`sgl.tasks.structure_learning.rwgsl_pseudo_labels` / ``learn_structure``.
"""
from sgl.models.gsl.config import RWGSLConfig
from sgl.models.gsl.graphs import _contains, _edge_keys, _undirected, _with_node_data  # noqa: F401
from sgl.models.gsl.graphs import check_gsl_graph as _check_graph  # noqa: F401
from sgl.models.gsl.knn import KNNGraph, KNNGraphConfig, NoStructureLearning
from sgl.models.gsl.registry import STRUCTURE_LEARNERS, structure_learner
from sgl.models.gsl.rwgsl import RWGSL
from sgl.models.gsl.scores import _segment_mean, jaccard_pairs, label_propagation, pair_scores  # noqa: F401
from sgl.models.gsl.walks import (  # noqa: F401
    _csr_of, _distinct_per_owner, _layer_samples, _neighbor_lists, _random_neighbor, candidate_pairs,
    distinct_layer_samples, random_walks,
)

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
