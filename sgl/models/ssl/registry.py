"""The registry of self-supervised models: names -> (model class, config factory, description).

Example:
    >>> from sgl.models.ssl import build_ssl_model, ssl_model_config
    >>> ssl_model_config("gcmae", preset="cora", epochs=5).encoder
    'gat'
    >>> build_ssl_model("gae", 4, hidden=8)
    GAE(in_features=4, hidden=8)
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

from sgl.errors import ConfigError
from sgl.models.ssl.baselines import DGI, GAE, DGIConfig, GAEConfig, grace_config, graphmae_config
from sgl.models.ssl.config import GCMAEConfig, gcmae_config
from sgl.models.ssl.gcmae import GCMAE

__all__ = ["SSL_MODELS", "ssl_model_config", "build_ssl_model"]


#: name -> (model class, config factory, description)
SSL_MODELS: Dict[str, Tuple[type, Callable[..., Any], str]] = {
    "gcmae": (GCMAE, GCMAEConfig, "GCMAE: masked autoencoder + contrastive + adjacency + variance losses"),
    "graphmae": (GCMAE, graphmae_config, "GraphMAE-style: masked feature reconstruction (SCE) only"),
    "grace": (GCMAE, grace_config, "GRACE-style: InfoNCE between two augmented views only"),
    "dgi": (DGI, DGIConfig, "Deep Graph Infomax (torch_geometric DeepGraphInfomax, GCN encoder)"),
    "gae": (GAE, GAEConfig, "Graph autoencoder (torch_geometric GAE, GCN encoder)"),
}


def ssl_model_config(name: str, **overrides: Any) -> Any:
    """The config of self-supervised model ``name`` with ``overrides`` (unknown keys rejected).

    For ``gcmae``, ``preset="cora"`` starts from :func:`~sgl.models.ssl.gcmae_config`'s preset.
    """
    key = str(name).lower()
    if key not in SSL_MODELS:
        raise ConfigError(f"unknown self-supervised model {name!r}; available: {', '.join(sorted(SSL_MODELS))}")
    _, factory, _ = SSL_MODELS[key]
    config_cls = GCMAEConfig if key in ("gcmae", "graphmae", "grace") else factory
    if key == "gcmae" and "preset" in overrides:
        # a named GCMAE preset (gcmae_config), e.g. --model-option preset=cora
        preset = overrides.pop("preset")
        factory = lambda **kw: gcmae_config(preset, **kw)  # noqa: E731
    unknown = set(overrides) - set(config_cls.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown option(s) {sorted(unknown)} for {name!r}; valid: "
                          f"{sorted(config_cls.__dataclass_fields__)}")
    try:
        return factory(**overrides)
    except TypeError as exc:  # pragma: no cover - guarded above
        raise ConfigError(f"bad option for {name!r}: {exc}") from exc


def build_ssl_model(name: str, in_features: int, config: Any = None, **overrides: Any) -> Any:
    """Instantiate self-supervised model ``name`` (``gcmae``, ``graphmae``, ``grace``, ``dgi``, ``gae``)."""
    if str(name).lower() not in SSL_MODELS:
        raise ConfigError(f"unknown self-supervised model {name!r}; available: {', '.join(sorted(SSL_MODELS))}")
    cfg = config if config is not None else ssl_model_config(name, **overrides)
    cls = SSL_MODELS[str(name).lower()][0]
    return cls(in_features, cfg)
