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
        passive_optimizer, passive_lr: the passive parties' bottom models (default: ``optimizer``
            and ``lr``).
        defense, sumkl_bound, marvell_scale: derivative perturbation (:mod:`sgl.federated.defenses`).
        attack: passive parties score the received derivatives with the norm and direction attacks.
        local_steps, workset, max_uses, xi: CELU-VFL (``local_steps`` = local updates per round
            trip, deterministic; 0 = vanilla split learning).
        rake, rake_weight, rake_consistency: passive parties run two differentiated bottom models
            (Rake; :func:`sgl.federated.rake.rake_loss`: ``rake_weight`` keeps them apart,
            ``rake_consistency`` keeps their difference out of the directions the top model uses).
        blindfl, key_bits, frac_bits: every passive party's bottom is a BlindFL source layer
            (:mod:`sgl.federated.blindfl`: Paillier keys of ``key_bits`` >= 1024 at the active party,
            ``frac_bits`` fixed-point bits), trained by plain SGD at ``passive_lr``; needs
            ``passive_optimizer='sgd'``, no ``bottom_hidden``, the ``full`` embedding, no defense,
            attack, CELU or Rake (the passive party sees no derivative, the active party no
            activation, only the layer output).
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
    passive_optimizer: Optional[str] = None
    passive_lr: Optional[float] = None
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
    rake_consistency: float = 10.0
    observe: int = 0
    blindfl: bool = False
    key_bits: int = 2048
    frac_bits: int = 16
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
        if self.passive_optimizer is not None:
            self.passive_optimizer = str(self.passive_optimizer).lower()
        for name in ("optimizer", "passive_optimizer"):
            value = getattr(self, name)
            if value is not None and value not in _OPTIMIZERS:
                raise ConfigError(f"{name} must be one of {', '.join(_OPTIMIZERS)}, got {value!r}")
        if self.passive_lr is not None and not float(self.passive_lr) > 0:
            raise ConfigError(f"passive_lr must be > 0 (or None for lr), got {self.passive_lr!r}")
        if self.blindfl:
            self._check_blindfl()
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
        if not float(self.latency_ms) >= 0 or not float(self.rake_weight) >= 0 \
                or not float(self.rake_consistency) >= 0:
            raise ConfigError("latency_ms, rake_weight and rake_consistency must be >= 0")
        if not 0 <= float(self.dropout) < 1:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")

    def _check_blindfl(self) -> None:
        from sgl.federated.paillier import MIN_KEY_BITS

        if (self.passive_optimizer or self.optimizer) != "sgd":
            raise ConfigError("BlindFL source layers update by plain SGD: set passive_optimizer='sgd' "
                              "(and passive_lr; the top model keeps its own optimizer)")
        if isinstance(self.key_bits, bool) or not isinstance(self.key_bits, int) or self.key_bits < MIN_KEY_BITS:
            raise ConfigError(f"key_bits must be an integer >= {MIN_KEY_BITS} (smaller Paillier keys are "
                              f"breakable), got {self.key_bits!r}")
        if isinstance(self.frac_bits, bool) or not isinstance(self.frac_bits, int) or not 8 <= self.frac_bits <= 20:
            raise ConfigError(f"frac_bits must be an integer in [8, 20] (3 * frac_bits must fit the 64-bit ring), "
                              f"got {self.frac_bits!r}")
        clashes = [name for name, bad in (("bottom_hidden", bool(self.bottom_hidden)),
                                          ("embedding", self.embedding != "full"),
                                          ("defense", self.defense != "none"), ("attack", self.attack),
                                          ("local_steps", self.local_steps > 0), ("rake", self.rake),
                                          ("observe", self.observe > 0)) if bad]
        if clashes:
            raise ConfigError(f"blindfl=True takes a linear source layer with the 'full' embedding and no "
                              f"derivative or activation exchange; drop {', '.join(clashes)}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)
