"""The SGAP contract shared by every scalable (decoupled) GNN.

A scalable model has three stages (Zhang et al., PaSca / SGL):

1. :meth:`SGAPModel.precompute` — parameter-free: a *graph operator* propagates the
   features ``k`` hops (:func:`sgl.ops.propagate_hops`); a non-learnable *message operator*
   combines the hops right away, a learnable one keeps them for training.
2. :meth:`SGAPModel.forward` — (learnable message operator, then) a trainable *base
   model* on mini-batches of precomputed rows.
3. :meth:`SGAPModel.postprocess` — optional parameter-free smoothing of the predicted class
   probabilities over the graph (``post_steps`` hops of ``post_graph_op``, combined by
   ``post_message``).

A model is fully described by its typed :class:`SGAPConfig`, so the CLI, the search space
and the Python API share one definition; nothing trains or propagates in a constructor.

Example:
    >>> import sgl
    >>> from sgl.models import SGAPModel, SGAPConfig
    >>> graph = sgl.datasets.load("karate")
    >>> config = SGAPConfig(k=3, message="concat", num_layers=2, hidden=16)   # a SIGN-style model
    >>> model = SGAPModel(graph.num_features, graph.num_classes, config)
    >>> model(model.precompute(graph)[torch.arange(4)]).shape
    torch.Size([4, 2])
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, Optional, Protocol, Union, runtime_checkable

import torch
from torch import nn

from sgl.errors import ConfigError
from sgl.models.features import NodeFeatures
from sgl.models.mlp import build_base_model
from sgl.ops import get_operator, propagate_hops, row_normalize
from sgl.ops.message_ops import get_message_op

__all__ = ["ScalableModel", "SGAPConfig", "SGAPModel"]


@runtime_checkable
class ScalableModel(Protocol):
    """What :class:`sgl.tasks.Trainer` needs of a model: the SGAP split as a declared interface.

    * ``precompute(graph, x=None, **options)`` -- parameter-free input preparation (propagated
      hops, a full-graph input, raw features); the trainer indexes its result by node.
    * ``forward(batch)`` -- logits of the rows in ``batch``.
    * ``postprocess(graph, logits)`` -- parameter-free post-processing of the logits of *every*
      node (identity for models without a post-propagation stage).
    * ``full_batch`` -- ``True`` when ``precompute`` returns one full-graph input and
      ``forward`` sees the whole graph (message-passing GNNs); the trainer then predicts per
      split instead of running ``postprocess`` over all nodes.

    Every zoo model implements it:

    >>> from sgl.models import SGC, GCN
    >>> isinstance(SGC(4, 2), ScalableModel), GCN.full_batch
    (True, True)
    """

    full_batch: bool

    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, **options: Any) -> Any: ...

    def forward(self, batch: Any) -> torch.Tensor: ...

    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor: ...


@dataclass
class SGAPConfig:
    """Every knob of a scalable model (defaults: SGC).

    Graph operator: ``graph_op`` in {adj, ppr, heat, lazy} with ``r``, ``self_loops``,
    ``alpha`` (PPR/lazy teleport), ``t`` (heat); ``k`` hops.
    Message operator: ``message`` (a name from :data:`sgl.ops.MESSAGE_OPERATORS`) over
    hops ``hop_start..k``, extra arguments in ``message_options``.
    Base model: ``base_model`` in {mlp, resmlp}, ``num_layers`` (1 = logistic regression),
    ``hidden``, ``dropout``, ``input_dropout``, ``batch_norm``.
    Post-processing: ``post_steps`` hops of ``post_graph_op`` (with ``post_alpha``) on the
    softmax output, combined by ``post_message``.
    """

    k: int = 2
    graph_op: str = "adj"
    r: float = 0.5
    self_loops: bool = True
    alpha: float = 0.1
    t: float = 5.0
    message: str = "last"
    hop_start: int = 0
    message_options: Dict[str, Any] = field(default_factory=dict)
    base_model: str = "mlp"
    num_layers: int = 1
    hidden: int = 64
    dropout: float = 0.0
    input_dropout: float = 0.0
    batch_norm: bool = False
    post_steps: int = 0
    post_graph_op: str = "adj"
    post_alpha: float = 0.1
    post_message: str = "last"
    #: row-normalise features before propagating (the GCN/SGC papers' preprocessing)
    normalize_features: bool = True

    def __post_init__(self) -> None:
        for name in ("k", "hop_start", "num_layers", "hidden", "post_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
        if self.k < 1:
            raise ConfigError(f"k (propagation hops) must be positive (>= 1), got {self.k}; a model without propagation "
                              f"is an MLP on raw features")
        if self.hop_start > self.k:
            raise ConfigError(f"hop_start={self.hop_start} is beyond k={self.k}; hops run 0..k")
        if self.num_layers < 1 or self.hidden < 1:
            raise ConfigError(f"num_layers and hidden must be >= 1, got {self.num_layers}, {self.hidden}")
        if not isinstance(self.message_options, dict):
            raise ConfigError(f"message_options must be a mapping, got {type(self.message_options).__name__}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def field_names(cls) -> set:
        return {f.name for f in fields(cls)}

    def graph_operator(self):
        options: Dict[str, Any] = {"r": self.r, "self_loops": self.self_loops}
        if self.graph_op in ("ppr", "lazy"):
            options["alpha"] = self.alpha
        if self.graph_op == "heat":
            options["t"] = self.t
        return get_operator(self.graph_op, **options)


class SGAPModel(nn.Module):
    """A scalable GNN assembled from an :class:`SGAPConfig` (see the module docstring)."""

    #: training defaults (fields of :class:`sgl.tasks.TrainConfig`) for this model family
    default_train_config: Dict[str, Any] = {}
    config_class = SGAPConfig
    full_batch = False

    def __init__(self, in_features: int, num_classes: int, config: Optional[SGAPConfig] = None) -> None:
        super().__init__()
        config = config or self.config_class()
        if in_features < 1 or num_classes < 2:
            raise ConfigError(f"need in_features >= 1 and num_classes >= 2, got {in_features}, {num_classes}")
        self.config = config
        self.in_features, self.num_classes = in_features, num_classes
        self.graph_op = config.graph_operator()
        self.k = config.k
        num_hops = config.k + 1
        self.message_op = get_message_op(config.message, **self._message_kwargs(in_features, num_hops))
        width = self.message_op.out_features(in_features, num_hops)
        self.base = build_base_model(config.base_model, width, config.hidden, num_classes, config.num_layers,
                                     config.dropout, config.input_dropout, config.batch_norm)
        self.post_op = get_operator(config.post_graph_op, **(
            {"alpha": config.post_alpha} if config.post_graph_op in ("ppr", "lazy") else {}))
        self.post_message_op = get_message_op(config.post_message)
        if self.post_message_op.learnable:
            raise ConfigError(f"post_message must be parameter-free, got learnable {config.post_message!r}")

    def _message_kwargs(self, in_features: int, num_hops: int) -> Dict[str, Any]:
        kwargs = {"start": self.config.hop_start, **self.config.message_options}
        from sgl.ops.message_ops import MESSAGE_OPERATORS

        cls = MESSAGE_OPERATORS.get(self.config.message)
        if cls is not None and getattr(cls, "learnable", False):
            kwargs.setdefault("in_features", in_features)
            kwargs.setdefault("num_hops", num_hops)
        return _accepted(cls, kwargs)

    # ------------------------------------------------------------------ SGAP stages
    def prepare_features(self, graph: Any, x: Optional[torch.Tensor]) -> torch.Tensor:
        x = graph.x if x is None else x
        if x is None:
            raise ConfigError("the graph has no node features (graph.x); pass x=...")
        return row_normalize(x) if self.config.normalize_features else x

    @torch.no_grad()
    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, *,
                   cache_dir: Optional[Union[str, os.PathLike]] = None, progress: bool = False) -> NodeFeatures:
        """Propagate ``k`` hops; combine them now unless the message operator is learnable."""
        hops = propagate_hops(graph, self.prepare_features(graph, x), self.k, self.graph_op,
                              cache_dir=cache_dir, progress=progress)
        if self.message_op.learnable:
            return NodeFeatures(hops)
        return NodeFeatures(self.message_op(hops))

    def forward(self, batch: Any) -> torch.Tensor:
        if self.message_op.learnable:
            batch = self.message_op(batch)
        return self.base(batch)

    @torch.no_grad()
    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor:
        """Smooth predicted probabilities over the graph (identity when ``post_steps=0``)."""
        if self.config.post_steps == 0:
            return logits
        probs = torch.softmax(logits, dim=1)
        hops = propagate_hops(graph, probs, self.config.post_steps, self.post_op)
        # log keeps argmax and makes the result usable as logits again
        return torch.log(self.post_message_op(hops).clamp_min(1e-12))

    def reset_parameters(self) -> None:
        self.message_op.reset_parameters()
        for module in self.base.modules():
            if module is not self.base and hasattr(module, "reset_parameters"):
                module.reset_parameters()
        if hasattr(self.base, "reset_parameters"):
            self.base.reset_parameters()

    def __repr__(self) -> str:
        cfg = self.config
        post = f", post={cfg.post_steps}x{self.post_op}" if cfg.post_steps else ""
        return (f"{type(self).__name__}(in_features={self.in_features}, num_classes={self.num_classes}, "
                f"k={cfg.k}, op={self.graph_op}, message={cfg.message}, base={cfg.base_model}"
                f"x{cfg.num_layers}{post})")


def _accepted(cls: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """Keep only the keyword arguments ``cls.__init__`` accepts (in_features etc. are optional)."""
    if cls is None:
        return kwargs
    import inspect

    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    auto = {"in_features", "num_hops"}
    return {k: v for k, v in kwargs.items() if k in params or k not in auto}
