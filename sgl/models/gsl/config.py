"""Hyper-parameters of :class:`~sgl.models.gsl.RWGSL` (defaults: the authors' ``args.py``)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Tuple

from sgl._checks import check_bool, check_int, check_real, with_message
from sgl.errors import ConfigError

__all__ = ["RWGSLConfig"]


def _check_real(value: Any, name: str, low: float = -math.inf, high: float = math.inf) -> None:
    # RWGSL's message spells out an unbounded interval as "[low, inf]" (check_real would write ">= low")
    message = f"RWGSL {name} must be a number in [{low}, {high}], got {value!r}"
    with_message(message, check_real, value, low, high)


@dataclass
class RWGSLConfig:
    """Hyper-parameters of :class:`RWGSL` (defaults: the authors' ``args.py`` defaults).

    ``exponents`` are :math:`(e_1, e_2, e_3)` for the feature cosine, the neighbourhood
    Jaccard index and the pseudo-label cosine. ``low``/``high`` are relative to each node's
    mean candidate score; ``low <= high`` is required. ``block_nodes`` bounds memory: the
    candidates of that many nodes are generated and scored at once.
    """

    rounds: int = 3
    walk_length: int = 5
    num_walks: int = 1
    num_samples: Tuple[int, ...] = (10, 10, 10)
    high: float = 0.8
    low: float = 0.1
    exponents: Tuple[float, float, float] = (0.5, 0.25, 1.0)
    lp_layers: int = 3
    lp_alpha: float = 0.4
    #: base model for the pseudo-labels: logistic regression on SGC features A^k X
    pseudo_k: int = 2
    pseudo_epochs: int = 100
    pseudo_lr: float = 0.2
    pseudo_weight_decay: float = 5e-5
    #: replace the pseudo-labels of training nodes by their true one-hot labels
    clamp_train_labels: bool = True
    block_nodes: int = 200_000
    #: pairs per block in the feature-cosine gather (bounds the [pairs, d] temporary)
    block_pairs: int = 1 << 20
    #: ``"official"``: the authors' ICDE code's two groups, each with its own mean: a
    #: layer-wise sample without replacement (delete/add as above) and the node's walk (a
    #: multiset; deletes edges below ``low`` x its mean, adds a node when
    #: ``max(score, feature cosine)`` passes ``high`` x its mean); ``"joint"``: one candidate
    #: set per node (current neighbours + samples + walk nodes) with one mean
    scheme: str = "official"
    #: turn the pseudo-labels into one-hot rows of their arg-max before label propagation (the
    #: authors' code propagates one-hot class ids)
    hard_pseudo_labels: bool = True

    def __post_init__(self) -> None:
        self.num_samples = tuple(self.num_samples)
        self.exponents = tuple(self.exponents)
        check_int(self.rounds, "RWGSL rounds", 1)
        check_int(self.walk_length, "RWGSL walk_length", 0)
        check_int(self.num_walks, "RWGSL num_walks", 0)
        for s in self.num_samples:
            check_int(s, "RWGSL num_samples entry", 0)
        if len(self.exponents) != 3:
            raise ConfigError(f"RWGSL exponents must hold 3 numbers (feature, jaccard, label), got {self.exponents!r}")
        for e in self.exponents:
            _check_real(e, "exponent", 0.0)
        _check_real(self.low, "low", 0.0)
        _check_real(self.high, "high", 0.0)
        if self.low > self.high:
            raise ConfigError(
                f"RWGSL thresholds need low <= high, got low={self.low} > high={self.high}: an edge could be "
                f"both deleted and added; swap them or lower low"
            )
        check_int(self.lp_layers, "RWGSL lp_layers", 0)
        _check_real(self.lp_alpha, "lp_alpha", 0.0, 1.0)
        check_int(self.pseudo_k, "RWGSL pseudo_k", 0)
        check_int(self.pseudo_epochs, "RWGSL pseudo_epochs", 1)
        _check_real(self.pseudo_lr, "pseudo_lr", 1e-12)
        _check_real(self.pseudo_weight_decay, "pseudo_weight_decay", 0.0)
        check_int(self.block_nodes, "RWGSL block_nodes", 1)
        check_int(self.block_pairs, "RWGSL block_pairs", 1)
        if self.scheme not in ("joint", "official"):
            raise ConfigError(f"RWGSL scheme must be 'joint' or 'official', got {self.scheme!r}")
        check_bool(self.hard_pseudo_labels, "RWGSL hard_pseudo_labels")
        check_bool(self.clamp_train_labels, "RWGSL clamp_train_labels")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)
