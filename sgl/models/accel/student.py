r"""A graph-free MLP student (GLNN, Zhang et al. ICLR 2022; NOSMOG position features).

The student computes

.. math::
    \hat y_v = \mathrm{MLP}\big([\,\mathrm{rownorm}(x_v)\ \|\ p_v\,]\big),

where :math:`p_v` are optional position features (:func:`positional_features`, computed
from the graph at *training* time only). Inference reads node features alone: no
adjacency, no propagation, so its per-node cost does not depend on the graph. It is
trained by :func:`sgl.tasks.distill.fit_student` on a teacher's soft labels plus the
hard labels; trained on hard labels only (``sgl train --model mlp``) it is the plain MLP
baseline of the GLNN paper.

Example:
    >>> import sgl, torch
    >>> g = sgl.datasets.load("karate")
    >>> student = GraphFreeMLP(g.num_features, g.num_classes, GraphFreeMLPConfig(hidden=16))
    >>> feats = student.precompute(g)                  # features only (no positions asked)
    >>> student.eval()(student.inputs(g.x[:3])).shape  # inference: features in, logits out
    torch.Size([3, 2])
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

import torch
from torch import nn

from sgl._checks import check_bool, check_int, check_probability
from sgl.errors import ConfigError, FeatureError
from sgl.models.accel.positional import positional_features
from sgl.models.features import NodeFeatures
from sgl.models.mlp import MLP
from sgl.ops import row_normalize

__all__ = ["GraphFreeMLP", "GraphFreeMLPConfig"]


@dataclass
class GraphFreeMLPConfig:
    """Hyper-parameters of :class:`GraphFreeMLP` (defaults: GLNN's Cora MLP, 2 x 128, dropout 0.6, raw features)."""

    hidden: int = 128
    num_layers: int = 2
    dropout: float = 0.6
    input_dropout: float = 0.0
    batch_norm: bool = False
    #: GLNN feeds the raw (binary bag-of-words) features; row-normalised ones made the student stall on Cora
    normalize_features: bool = False
    #: width of the NOSMOG-style position features (0 = none)
    positional_dim: int = 0
    #: propagation steps of the position features
    positional_steps: int = 3

    def __post_init__(self) -> None:
        check_int(self.hidden, "mlp hidden", 1)
        check_int(self.num_layers, "mlp num_layers", 1)
        check_probability(self.dropout, "mlp dropout")
        check_probability(self.input_dropout, "mlp input_dropout")
        check_bool(self.batch_norm, "mlp batch_norm")
        check_bool(self.normalize_features, "mlp normalize_features")
        check_int(self.positional_dim, "mlp positional_dim", 0)
        check_int(self.positional_steps, "mlp positional_steps", 1)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class GraphFreeMLP(nn.Module):
    """MLP on node features (and optional position features); see the module docstring."""

    full_batch = False
    #: GLNN's Cora MLP setting (lr 0.01, 200 epochs, patience 50) without weight decay (GLNN: 5e-3), chosen on
    #: Cora *validation* accuracy (docs/acceleration.md): a student of the GAMLP preset reached the teacher's
    #: validation accuracy (81.6, seeds 0-1) with 0, 80.7-81.0 with 5e-4 and 500 epochs, 78.6 (seed 0) with
    #: 5e-4 as before; the hard-label MLP scored 58.3 with 0 and 58.1 with 5e-4 (validation, seeds 0-1)
    default_train_config: Dict[str, Any] = {"lr": 0.01, "weight_decay": 0.0, "epochs": 200, "patience": 50}
    config_class = GraphFreeMLPConfig

    def __init__(self, in_features: int, num_classes: int, config: Optional[GraphFreeMLPConfig] = None) -> None:
        super().__init__()
        config = config or GraphFreeMLPConfig()
        if not isinstance(config, GraphFreeMLPConfig):
            raise ConfigError(f"GraphFreeMLP takes a GraphFreeMLPConfig, got {type(config).__name__}")
        if in_features < 1 or num_classes < 2:
            raise ConfigError(f"need in_features >= 1 and num_classes >= 2, got {in_features}, {num_classes}")
        self.config, self.in_features, self.num_classes = config, int(in_features), int(num_classes)
        self.base = MLP(in_features + config.positional_dim, config.hidden, num_classes, config.num_layers,
                        config.dropout, config.input_dropout, config.batch_norm)

    def inputs(self, x: torch.Tensor, positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The student's input rows from raw features (and position rows): no graph involved."""
        if x.dim() != 2 or x.size(1) != self.in_features:
            raise FeatureError(f"features have shape {tuple(x.shape)}; expected [n, {self.in_features}]")
        x = x.float()
        if self.config.normalize_features:
            x = row_normalize(x)
        if self.config.positional_dim:
            if positions is None or positions.shape != (x.size(0), self.config.positional_dim):
                raise FeatureError(f"this student takes {self.config.positional_dim} position features per node; "
                                   f"pass positions of shape [{x.size(0)}, {self.config.positional_dim}]")
            x = torch.cat([x, positions.to(x.device, x.dtype)], dim=1)
        return x

    @torch.no_grad()
    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, **options: Any) -> NodeFeatures:
        """Raw features, plus position features drawn from ``graph`` when configured (training time)."""
        x = graph.x if x is None else x
        if x is None:
            raise FeatureError("the graph has no node features (graph.x); a graph-free MLP needs them")
        positions = None
        if self.config.positional_dim:
            positions = positional_features(graph, self.config.positional_dim, self.config.positional_steps)
        return NodeFeatures(self.inputs(x, positions))

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        return self.base(batch)

    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor:
        """Identity: a graph-free student never reads the graph after training."""
        return logits

    def reset_parameters(self) -> None:
        self.base.reset_parameters()

    def __repr__(self) -> str:
        pos = f", positional_dim={self.config.positional_dim}" if self.config.positional_dim else ""
        return (f"GraphFreeMLP(in_features={self.in_features}, num_classes={self.num_classes}, "
                f"hidden={self.config.hidden}, num_layers={self.config.num_layers}{pos})")
