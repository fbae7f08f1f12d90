"""Models: scalable (SGAP) GNNs built on the precompute -> train -> postprocess split."""
from __future__ import annotations

from typing import Any, Dict, Tuple, Type

from sgl.errors import ConfigError
from sgl.models.base import SGAPModel
from sgl.models.sgc import SGC, SGCConfig

__all__ = ["SGAPModel", "SGC", "SGCConfig", "MODELS", "build_model", "model_config"]

#: name -> (model class, config dataclass, one-line description)
MODELS: Dict[str, Tuple[Type[SGAPModel], type, str]] = {
    "sgc": (SGC, SGCConfig, "Simplified graph convolution: linear model on A^K X (Wu et al. 2019)"),
}


def _lookup(name: str):
    key = name.lower()
    if key not in MODELS:
        raise ConfigError(f"unknown model {name!r}; available: {', '.join(sorted(MODELS))}")
    return MODELS[key]


def model_config(name: str, **overrides: Any) -> Any:
    """The typed config of model ``name`` with ``overrides`` applied (unknown keys rejected)."""
    _, config_cls, _ = _lookup(name)
    fields = set(config_cls.__dataclass_fields__)
    unknown = set(overrides) - fields
    if unknown:
        raise ConfigError(f"unknown option(s) {sorted(unknown)} for model {name!r}; valid: {sorted(fields)}")
    return config_cls(**overrides)


def build_model(name: str, in_features: int, num_classes: int, config: Any = None) -> SGAPModel:
    """Instantiate model ``name`` (e.g. ``"sgc"``) with its config (default config if None)."""
    model_cls, config_cls, _ = _lookup(name)
    return model_cls(in_features, num_classes, config or config_cls())
