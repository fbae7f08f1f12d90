"""Training loops and metrics."""
from sgl.tasks.metrics import accuracy, macro_f1
from sgl.tasks.node_classification import (
    Distillation,
    TrainConfig,
    Trainer,
    run_node_classification,
    seed_everything,
    summarize,
)
from sgl.tasks.rlu import RLUConfig, train_rlu

__all__ = ["accuracy", "macro_f1", "TrainConfig", "Trainer", "Distillation", "run_node_classification",
           "seed_everything", "summarize", "RLUConfig", "train_rlu"]
