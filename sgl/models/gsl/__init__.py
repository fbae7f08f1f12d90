"""Graph structure learning: RWGSL (random-walk candidates, three-term scores) and baselines.

Rooms: :mod:`~sgl.models.gsl.config` (``RWGSLConfig``), :mod:`~sgl.models.gsl.walks` (random
walks, layer-wise samples, candidate pairs), :mod:`~sgl.models.gsl.scores` (Jaccard index, pair
scores, label propagation), :mod:`~sgl.models.gsl.graphs` (input checks, edge keys, symmetric
copies), :mod:`~sgl.models.gsl.rwgsl` (the learner), :mod:`~sgl.models.gsl.knn` (kNN graph and
no-learning baselines) and :mod:`~sgl.models.gsl.registry` (``STRUCTURE_LEARNERS``). The
learners are parameter-free; the pseudo-label model RWGSL needs is trained by
:func:`sgl.tasks.structure_learning.learn_structure`.
"""
from sgl.models.gsl.config import RWGSLConfig
from sgl.models.gsl.graphs import check_gsl_graph
from sgl.models.gsl.knn import KNNGraph, KNNGraphConfig, NoStructureLearning
from sgl.models.gsl.registry import STRUCTURE_LEARNERS, structure_learner
from sgl.models.gsl.rwgsl import RWGSL
from sgl.models.gsl.scores import jaccard_pairs, label_propagation, pair_scores
from sgl.models.gsl.walks import candidate_pairs, distinct_layer_samples, random_walks

__all__ = [
    "RWGSLConfig", "RWGSL", "KNNGraphConfig", "KNNGraph", "NoStructureLearning", "STRUCTURE_LEARNERS",
    "structure_learner", "candidate_pairs", "pair_scores", "jaccard_pairs", "label_propagation", "random_walks",
    "distinct_layer_samples", "check_gsl_graph",
]
