"""Training loops and metrics."""
from sgl.tasks.metrics import accuracy, macro_f1
from sgl.tasks.node_classification import TrainConfig, Trainer, run_node_classification, seed_everything, summarize

__all__ = ["accuracy", "macro_f1", "TrainConfig", "Trainer", "run_node_classification", "seed_everything",
           "summarize"]
