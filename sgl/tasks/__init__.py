"""Every training loop and metric of SGL, and the one run entry point.

* :class:`RunConfig` + :func:`run` -- a typed, serialisable run (what ``sgl train`` builds); a
  run record's ``"config"`` replays it.
* :class:`TrainConfig` (:mod:`sgl.tasks.config`) -- the one definition of optimisation settings.
* node classification (:class:`Trainer`, :func:`run_node_classification`, GAMLP's RLU),
  sampled mini-batches (:mod:`sgl.tasks.minibatch`), out-of-core training
  (:mod:`sgl.tasks.outofcore`), self-supervised pre-training (:func:`pretrain`), structure
  learning (:func:`learn_structure`), link prediction (self-supervised embeddings, or a zoo model
  trained with a pair decoder: :func:`fit_link_predictor`; OGB's Hits@K and MRR), clustering, graph
  classification, CTR.
* run records' provenance (:func:`run_provenance`: SGL and torch versions, :func:`dataset_hash`).
* many processes (``RunConfig.procs``, :class:`DistributedConfig`): DDP training of scalable models
  (:func:`train_ddp`, :mod:`sgl.tasks.dist_precompute`), distributed sampling
  (:mod:`sgl.tasks.dist_minibatch`), spawned or under torchrun (:mod:`sgl.tasks.dist_run`).
* acceleration (docs/acceleration.md): distillation into a graph-free student
  (:mod:`sgl.tasks.distill`), weight pruning and UGS (:mod:`sgl.tasks.prune`, :mod:`sgl.tasks.ugs`),
  graph condensation (:mod:`sgl.tasks.condense`, :mod:`sgl.tasks.condense_eval`).
"""
from sgl.tasks.config import TrainConfig
from sgl.tasks.metrics import accuracy, macro_f1
from sgl.tasks.stats import peak_rss_mb
from sgl.tasks.node_classification import (
    Distillation,
    TrainConfig,
    Trainer,
    seed_everything,
    summarize,
)
from sgl.tasks.node_runs import run_node_classification
from sgl.tasks.rlu import RLUConfig, train_rlu
from sgl.tasks.clustering import cluster_metrics, clustering_accuracy, kmeans, run_clustering
from sgl.tasks.graph_classification import batch_graphs, evaluate_graph_embeddings, pool, run_graph_classification
from sgl.tasks.linear_probe import linear_probe, run_linear_probe
from sgl.tasks.link_prediction import EdgeSplit, link_metrics, link_scores, run_link_prediction, split_edges
from sgl.tasks.link_supervised import fit_link_predictor, run_supervised_link_prediction
from sgl.tasks.ranking_metrics import hits_at_k, link_eval, mean_reciprocal_rank
from sgl.tasks.pseudo_labels import model_pseudo_labels
from sgl.tasks.ssl_pretraining import pretrain
from sgl.tasks.structure_learning import learn_structure, rwgsl_pseudo_labels
from sgl.tasks.outofcore import OutOfCoreConfig, OutOfCoreTrainer
from sgl.tasks.provenance import dataset_hash, run_provenance
from sgl.tasks.dist_config import DistributedConfig
from sgl.tasks.ddp import train_ddp
from sgl.tasks.distill import DistillConfig, fit_student, run_distillation
from sgl.tasks.prune import magnitude_masks, prune_model
from sgl.tasks.ugs import ugs
from sgl.tasks.condense import CondenseConfig, condense
from sgl.tasks.condense_eval import run_condensed

__all__ = ["accuracy", "macro_f1", "TrainConfig", "Trainer", "Distillation", "run_node_classification",
           "seed_everything", "summarize", "RLUConfig", "train_rlu",
           "linear_probe", "run_linear_probe", "cluster_metrics", "clustering_accuracy", "kmeans", "run_clustering",
           "EdgeSplit", "split_edges", "link_scores", "link_metrics", "run_link_prediction",
           "fit_link_predictor", "run_supervised_link_prediction", "hits_at_k", "mean_reciprocal_rank", "link_eval",
           "batch_graphs", "pool", "evaluate_graph_embeddings", "run_graph_classification", "model_pseudo_labels",
           "pretrain", "learn_structure", "rwgsl_pseudo_labels",
           "OutOfCoreConfig", "OutOfCoreTrainer", "dataset_hash", "run_provenance",
           "RunConfig", "StructureConfig", "SamplingConfig", "CTRConfig", "run", "peak_rss_mb",
           "DistributedConfig", "train_ddp", "DistillConfig", "fit_student", "run_distillation", "prune_model",
           "magnitude_masks", "ugs", "CondenseConfig", "condense", "run_condensed"]
from sgl.tasks.run_config import CTRConfig, RunConfig, SamplingConfig, StructureConfig  # noqa: E402
from sgl.tasks.run import run  # noqa: E402
