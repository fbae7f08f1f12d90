"""Reliable Label Utilisation (RLU): GAMLP's multi-stage self-distillation.

Stage 0 trains a model normally. After each stage the best (validation-selected) model
predicts every node; ``P = softmax(logits / temperature)``; the *confident* set is the
non-training nodes with ``max P > threshold``. The next stage trains a **fresh** model whose
label input is seeded with the training one-hots **plus P on the confident nodes**, and whose
loss adds ``gamma`` times a confidence-weighted KL term towards P on those nodes
(:class:`sgl.tasks.Distillation`). Selection is on validation accuracy at every stage; test
labels are never used (confident nodes are chosen by the model's own confidence).

Example:
    >>> import sgl
    >>> from sgl.models import GAMLP, GAMLPConfig
    >>> from sgl.tasks import TrainConfig
    >>> from sgl.tasks.rlu import RLUConfig, train_rlu
    >>> graph = sgl.datasets.load("karate")
    >>> factory = lambda: GAMLP(graph.num_features, graph.num_classes, GAMLPConfig(k=2, hidden=8, label_hops=2))
    >>> out = train_rlu(factory, graph, TrainConfig(progress=False), RLUConfig(stages=[20, 10], threshold=0.6))
    >>> len(out["stages"])
    2
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional

import torch

from sgl.device import get_device
from sgl.errors import ConfigError
from sgl.tasks.config import TrainConfig
from sgl.tasks.node_classification import Distillation, Trainer

__all__ = ["RLUConfig", "train_rlu"]


@dataclass
class RLUConfig:
    """``stages``: epochs per stage (stage 0 is plain training); ``threshold``/``temperature``
    select the confident nodes; ``gamma`` scales the distillation loss."""

    stages: List[int] = field(default_factory=lambda: [200, 100, 100])
    threshold: float = 0.85
    temperature: float = 1.0
    gamma: float = 0.1
    #: which nodes may become confident: "non_train" (every node outside the training set) or
    #: "val_test" (only validation/test nodes, the official papers100M rule: most of its nodes
    #: are unlabeled and outside every split)
    candidates: str = "non_train"

    def __post_init__(self) -> None:
        if not self.stages or any((not isinstance(e, int)) or e < 1 for e in self.stages):
            raise ConfigError(f"stages must be a non-empty list of positive epoch counts, got {self.stages!r}")
        if not 0.0 <= self.threshold < 1.0 or self.temperature <= 0 or self.gamma < 0:
            raise ConfigError("need threshold in [0, 1), temperature > 0 and gamma >= 0")
        if self.candidates not in ("non_train", "val_test"):
            raise ConfigError(f"candidates must be 'non_train' or 'val_test', got {self.candidates!r}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def train_rlu(model_factory: Callable[[], Any], graph: Any, train_config: Optional[TrainConfig] = None,
              rlu_config: Optional[RLUConfig] = None, seed: int = 0, features: Any = None) -> Dict[str, Any]:
    """Run every RLU stage; returns the last stage's metrics plus a per-stage history.

    The model must offer ``with_label_input(features, graph, label_matrix)`` (GAMLP with
    ``label_hops > 0``): the feature hops are propagated once (or passed in ``features``) and
    only the label input is rebuilt for each stage.
    """
    train_config = train_config or TrainConfig()
    rlu = rlu_config or RLUConfig()
    history: List[Dict[str, Any]] = []
    distillation = None
    result: Dict[str, Any] = {}
    if features is None:
        features = model_factory().precompute(graph)
    stage_features = features
    if rlu.candidates == "val_test":
        allowed = graph.val_mask | graph.test_mask
    else:
        allowed = ~graph.train_mask
    for stage, epochs in enumerate(rlu.stages):
        trainer = Trainer(TrainConfig(**{**asdict(train_config), "epochs": epochs}))
        model = model_factory()  # a fresh model every stage
        result = trainer.fit(model, stage_features, graph, seed=seed, distillation=distillation)
        history.append({**result, "stage": stage, "confident_nodes": 0 if distillation is None
                        else int(distillation.index.numel())})
        if stage == len(rlu.stages) - 1:
            break
        device = get_device(train_config.device)
        logits = trainer.predict_all(model, stage_features, graph, device)
        probs = torch.softmax(logits / rlu.temperature, dim=1)
        index = ((probs.max(dim=1).values > rlu.threshold) & allowed).nonzero().flatten()
        label_matrix = torch.zeros(graph.num_nodes, graph.num_classes, device=probs.device)
        train = graph.train_mask.nonzero().flatten()
        label_matrix[train, graph.y[train]] = 1.0
        label_matrix[index] = probs[index]
        stage_features = model.with_label_input(features, graph, label_matrix)
        distillation = Distillation(index, probs[index], rlu.gamma) if index.numel() else None
    return {**result, "stages": history}
