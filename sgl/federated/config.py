"""One typed configuration of a vertical federated training run (:class:`FederatedConfig`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from sgl.errors import ConfigError
from sgl.federated.defenses import DEFENSES

__all__ = ["FederatedConfig"]

_MODELS = ("wdl", "deepfm", "dlrm", "dcn")
_OPTIMIZERS = ("adam", "adagrad", "sgd")


@dataclass
class FederatedConfig:
    """Model, optimisation, defense, CELU-VFL, Rake and link settings of a split-learning run.

    Attributes:
        model: top CTR model (``wdl``, ``deepfm``, ``dlrm``, ``dcn``).
        embed_dim, hidden, bottom_hidden, embedding, dropout: the split model
            (:mod:`sgl.federated.models`); ``bottom_hidden`` adds an MLP to every bottom model.
        optimizer, lr, batch_size, epochs, max_steps, pos_weight, seed: training. Every party
            draws the same seeded batch order (the active party would send the seed).
        defense, sumkl_bound, marvell_scale: derivative perturbation (:mod:`sgl.federated.defenses`).
        attack: passive parties score the received derivatives with the norm and direction attacks.
        local_steps, workset, max_uses, xi: CELU-VFL (``local_steps`` = local updates per round
            trip, deterministic; 0 = vanilla split learning).
        rake, rake_weight: passive parties run two differentiated bottom models (Rake).
        observe: the active party records the activations it receives for this many training rows
            and for the test rows (the surface of the Rake attacks).
        eval_every: validation every this many rounds (0: at the end of each epoch).
        bandwidth_mbps, latency_ms: the wide-area link model.
        timeout: seconds any party waits for a message before raising ``CommError``.
    """

    model: str = "wdl"
    embed_dim: int = 8
    hidden: List[int] = field(default_factory=lambda: [64])
    bottom_hidden: List[int] = field(default_factory=list)
    embedding: str = "full"
    dropout: float = 0.0
    optimizer: str = "adam"
    lr: float = 1e-3
    batch_size: int = 256
    epochs: int = 1
    max_steps: Optional[int] = None
    pos_weight: float = 1.0
    seed: int = 0
    defense: str = "none"
    sumkl_bound: Optional[float] = None
    marvell_scale: Optional[float] = None
    attack: bool = False
    local_steps: int = 0
    workset: int = 5
    max_uses: int = 5
    xi: float = 0.5
    rake: bool = False
    rake_weight: float = 0.1
    observe: int = 0
    eval_every: int = 0
    bandwidth_mbps: float = 100.0
    latency_ms: float = 10.0
    timeout: float = 60.0

    def __post_init__(self) -> None:
        self.model = str(self.model).lower()
        self.defense = str(self.defense).lower().replace("_", "-")
        self.optimizer = str(self.optimizer).lower()
        if isinstance(self.hidden, int):
            self.hidden = [self.hidden]
        if isinstance(self.bottom_hidden, int):
            self.bottom_hidden = [self.bottom_hidden]
        if self.model not in _MODELS:
            raise ConfigError(f"model must be one of {', '.join(_MODELS)}, got {self.model!r}")
        if self.optimizer not in _OPTIMIZERS:
            raise ConfigError(f"optimizer must be one of {', '.join(_OPTIMIZERS)}, got {self.optimizer!r}")
        if self.defense not in DEFENSES:
            raise ConfigError(f"defense must be one of {', '.join(DEFENSES)}, got {self.defense!r}")
        if self.defense.startswith("projpert") and not (self.sumkl_bound or 0) > 0:
            raise ConfigError(f"defense {self.defense} needs sumkl_bound > 0 (e.g. 4.0)")
        if self.defense == "marvell" and self.sumkl_bound is None and self.marvell_scale is None:
            raise ConfigError("defense marvell needs sumkl_bound (least noise meeting it) or marvell_scale")
        if self.defense in ("none", "max-norm") and (self.sumkl_bound is not None or self.marvell_scale is not None):
            raise ConfigError(f"defense {self.defense} takes no sumkl_bound / marvell_scale; drop them")
        for name in ("embed_dim", "batch_size", "epochs", "workset", "max_uses"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("local_steps", "observe", "eval_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 1):
            raise ConfigError(f"max_steps must be None or an integer >= 1, got {self.max_steps!r}")
        for name in ("lr", "pos_weight", "timeout", "bandwidth_mbps"):
            if not float(getattr(self, name)) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not float(self.latency_ms) >= 0 or not float(self.rake_weight) >= 0:
            raise ConfigError("latency_ms and rake_weight must be >= 0")
        if not 0 <= float(self.dropout) < 1:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)
