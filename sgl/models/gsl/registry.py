"""The registry of structure learners: names -> (learner class, config dataclass, description)."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from sgl.errors import ConfigError
from sgl.models.gsl.config import RWGSLConfig
from sgl.models.gsl.knn import KNNGraph, KNNGraphConfig, NoStructureLearning
from sgl.models.gsl.rwgsl import RWGSL

__all__ = ["STRUCTURE_LEARNERS", "structure_learner"]


#: name -> (learner class, config dataclass or None, description)
STRUCTURE_LEARNERS: Dict[str, Tuple[type, Optional[type], str]] = {
    "rwgsl": (RWGSL, RWGSLConfig, "RWGSL: random-walk candidates, 3-term similarity, relative thresholds"),
    "knn": (KNNGraph, KNNGraphConfig, "cosine kNN graph of the features (faiss)"),
    "none": (NoStructureLearning, None, "no structure learning: the input graph"),
}


def structure_learner(name: str, seed: int = 0, progress: bool = False, **options: Any) -> Any:
    """Build structure learner ``name`` (``rwgsl``, ``knn``, ``none``) with config ``options``.

    Example:
        >>> structure_learner("rwgsl", rounds=2).config.rounds
        2

    RWGSL's learner needs pseudo-labels: run it with
    :func:`sgl.tasks.structure_learning.learn_structure`, which trains its base model.
    """
    key = str(name).lower()
    if key not in STRUCTURE_LEARNERS:
        raise ConfigError(f"unknown structure learner {name!r}; available: {', '.join(sorted(STRUCTURE_LEARNERS))}")
    cls, config_cls, _ = STRUCTURE_LEARNERS[key]
    if config_cls is None:
        if options:
            raise ConfigError(f"structure learner {name!r} takes no options, got {sorted(options)}")
        return cls(seed=seed, progress=progress)
    valid = set(config_cls.__dataclass_fields__)
    unknown = set(options) - valid
    if unknown:
        raise ConfigError(f"unknown option(s) {sorted(unknown)} for {name!r}; valid: {sorted(valid)}")
    return cls(config_cls(**options), seed=seed, progress=progress)
