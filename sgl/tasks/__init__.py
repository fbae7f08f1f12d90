"""Training loops and metrics."""
from sgl.tasks.metrics import accuracy, macro_f1
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
from sgl.tasks.linear_probe import linear_probe
from sgl.tasks.link_prediction import EdgeSplit, link_metrics, link_scores, run_link_prediction, split_edges
from sgl.tasks.pseudo_labels import model_pseudo_labels

__all__ = ["accuracy", "macro_f1", "TrainConfig", "Trainer", "Distillation", "run_node_classification",
           "seed_everything", "summarize", "RLUConfig", "train_rlu",
           "linear_probe", "cluster_metrics", "clustering_accuracy", "kmeans", "run_clustering",
           "EdgeSplit", "split_edges", "link_scores", "link_metrics", "run_link_prediction",
           "batch_graphs", "pool", "evaluate_graph_embeddings", "run_graph_classification", "model_pseudo_labels"]
