"""PaSca-V1, V2 and V3: the scalable GNNs PaSca's search found (Zhang et al., WWW 2022).

As instantiated in the SGL library (see ``shared/notes/sgl_anchor.md`` §1.4): all train a
residual MLP on hops ``1..K`` combined by a learnable message operator.
"""
from __future__ import annotations

from dataclasses import dataclass

from sgl.models.base import SGAPConfig, SGAPModel

__all__ = ["PaSCaV1", "PaSCaV1Config", "PaSCaV2", "PaSCaV2Config", "PaSCaV3", "PaSCaV3Config"]


@dataclass
class PaSCaV1Config(SGAPConfig):
    """V1: lazy PPR steps ``(1-α)Â + αI`` (α=0.1), learnable hop weights over hops 1..K, ResMLP."""

    k: int = 3
    graph_op: str = "lazy"
    alpha: float = 0.1
    message: str = "learnable_weighted"
    hop_start: int = 1
    base_model: str = "resmlp"
    num_layers: int = 3
    hidden: int = 128
    dropout: float = 0.5


@dataclass
class PaSCaV2Config(SGAPConfig):
    """V2: normalised adjacency, per-node gated hop weights over hops 1..K, ResMLP."""

    k: int = 3
    message: str = "gate"
    hop_start: int = 1
    base_model: str = "resmlp"
    num_layers: int = 3
    hidden: int = 128
    dropout: float = 0.5


@dataclass
class PaSCaV3Config(PaSCaV2Config):
    """V3: V2 plus post-propagation of predictions with PPR (α=0.3), last hop."""

    post_steps: int = 3
    post_graph_op: str = "ppr"
    post_alpha: float = 0.3
    post_message: str = "last"


_TRAIN = {"lr": 0.01, "weight_decay": 5e-4, "epochs": 200}


class PaSCaV1(SGAPModel):
    """PaSca-V1 (see :class:`PaSCaV1Config`)."""

    config_class = PaSCaV1Config
    default_train_config = _TRAIN


class PaSCaV2(SGAPModel):
    """PaSca-V2 (see :class:`PaSCaV2Config`)."""

    config_class = PaSCaV2Config
    default_train_config = _TRAIN


class PaSCaV3(SGAPModel):
    """PaSca-V3 (see :class:`PaSCaV3Config`)."""

    config_class = PaSCaV3Config
    default_train_config = _TRAIN
