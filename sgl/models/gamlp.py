"""GAMLP: Graph Attention Multi-Layer Perceptron (Zhang et al., KDD 2022).

Per node, GAMLP weighs the propagated hops ``X, ÂX, ..., Â^K X`` with a learned attention
over its receptive fields — JK attention (scores against a reference built from all hops)
or recursive attention (scores against the attention-weighted history of lower hops) — and
feeds the combination to an MLP. Optionally (``label_hops > 0``) it adds a second input:
the training labels propagated ``label_hops`` times with the mean operator ``D⁻¹A``, passed
through a small MLP and added to the output (the paper's label utilisation; RLU, the
multi-stage self-distillation, lives in :mod:`sgl.tasks.rlu`).

Formulas and defaults follow the official code (PKU-DAIR/GAMLP ``model.py``); see
``shared/notes/sgl_anchor.md`` §2. Unlike the original SGL library, attention scores are
computed per node (no cross-node reshape) and recursive attention softmaxes raw scores.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, List, Optional, Union

import torch
from torch import nn

from sgl.errors import ConfigError, FeatureError
from sgl.models.base import SGAPConfig
from sgl.models.features import NodeFeatures
from sgl.models.ffn_ii import FeedForwardNetII
from sgl.models.mlp import MLP
from sgl.ops import NormalizedAdjacency, propagate_hops, row_normalize
from sgl.ops.message_ops import get_message_op

__all__ = ["GAMLP", "GAMLPConfig", "OUTPUT_NETS", "propagate_labels"]

#: the output networks GAMLP can use: ours and the official code's
OUTPUT_NETS = ("mlp", "official")


@dataclass
class GAMLPConfig(SGAPConfig):
    """GAMLP hyper-parameters (on top of the graph-operator fields of :class:`SGAPConfig`).

    ``attention``: ``"jk"`` or ``"recursive"``; ``jk_layers``: depth of the JK reference MLP;
    ``act``: score activation (sigmoid, relu, leaky_relu); ``att_dropout``: dropout on the
    attention weights; ``pre_process``: a per-hop 2-layer MLP (``d -> hidden``) before the
    attention; ``residual``: add a projection of ``X`` to the combined features;
    ``num_layers``/``hidden``/``dropout``: the output MLP; ``label_hops``: label propagation
    steps for the label input (0 = no label input), ``label_layers``/``label_dropout``: its MLP.
    ``output_net``: ``"mlp"`` (our :class:`~sgl.models.MLP`) or ``"official"``, the official
    code's :class:`~sgl.models.ffn_ii.FeedForwardNetII` (BatchNorm on every layer, the logits
    included; initial-residual middle layers). With ``"official"`` and ``attention="jk"`` the JK
    reference is the official one too: ``FeedForwardNetII(K·d -> hidden -> hidden)`` with
    ``jk_layers`` layers, then ReLU and ``dropout``, scored by ``Linear(d + hidden, 1)``.
    ``batch_norm`` then applies to the ``pre_process`` MLPs only.
    """

    k: int = 10
    attention: str = "jk"
    jk_layers: int = 2
    #: GAMLP's argparse default is relu, its OGB presets use leaky_relu/sigmoid; relu gives a
    #: node whose scores are all negative uniform weights and no gradient
    act: str = "leaky_relu"
    att_dropout: float = 0.0
    pre_process: bool = False
    residual: bool = False
    num_layers: int = 2
    hidden: int = 64
    dropout: float = 0.8
    input_dropout: float = 0.0
    label_hops: int = 0
    label_layers: int = 2
    label_dropout: float = 0.0
    output_net: str = "mlp"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.output_net not in OUTPUT_NETS:
            raise ConfigError(f"output_net must be one of {list(OUTPUT_NETS)}, got {self.output_net!r} "
                              f"('official' is the official GAMLP code's FeedForwardNetII)")
        if self.attention not in ("jk", "recursive"):
            raise ConfigError(f"attention must be 'jk' or 'recursive', got {self.attention!r}")
        if self.k < 1:
            raise ConfigError(f"GAMLP needs k >= 1 hops, got {self.k}")
        if self.label_hops < 0 or self.label_layers < 1 or self.jk_layers < 1:
            raise ConfigError("label_hops must be >= 0 and label_layers, jk_layers >= 1")
        # the SGAP fields GAMLP replaces with its attention must not be set silently
        ignored = {name: value for name, value, default in (
            ("message", self.message, "last"), ("hop_start", self.hop_start, 0),
            ("message_options", self.message_options, {}), ("base_model", self.base_model, "mlp"),
            ("post_steps", self.post_steps, 0)) if value != default}
        if ignored:
            raise ConfigError(f"GAMLP combines hops with its own attention; {sorted(ignored)} do not apply "
                              f"(use attention=jk|recursive)")


def propagate_labels(graph: Any, label_matrix: torch.Tensor, hops: int) -> torch.Tensor:
    """``hops`` steps of mean aggregation ``D⁻¹A`` (no self-loops) of a ``[n, C]`` label matrix.

    Only the current hop is kept: the label input uses the last one alone.
    """
    op = NormalizedAdjacency(r=0.0, self_loops=False)
    adj = op.adjacency(graph, label_matrix.dtype)
    out = label_matrix
    for _ in range(hops):
        out = op.apply(adj, out)
    return out


def train_label_matrix(graph: Any) -> torch.Tensor:
    """One-hot rows for training nodes, zeros elsewhere (the label input never sees val/test labels)."""
    if graph.y is None or graph.train_mask is None:
        raise FeatureError("the label input needs graph.y and graph.train_mask")
    matrix = torch.zeros(graph.num_nodes, graph.num_classes)
    train = graph.train_mask.nonzero().flatten()
    matrix[train, graph.y[train]] = 1.0
    return matrix


class GAMLP(nn.Module):
    r"""GAMLP with JK or recursive receptive-field attention and optional label input.

    Example:
        >>> import sgl, torch
        >>> graph = sgl.datasets.load("karate")
        >>> model = GAMLP(graph.num_features, graph.num_classes, GAMLPConfig(k=3, hidden=16, label_hops=2))
        >>> feats = model.precompute(graph)
        >>> model(feats[torch.arange(5)]).shape
        torch.Size([5, 2])
    """

    config_class = GAMLPConfig
    full_batch = False
    default_train_config = {"lr": 0.01, "weight_decay": 5e-4, "epochs": 200, "patience": 50}

    def __init__(self, in_features: int, num_classes: int, config: Optional[GAMLPConfig] = None) -> None:
        super().__init__()
        config = config or GAMLPConfig()
        if in_features < 1 or num_classes < 2:
            raise ConfigError(f"need in_features >= 1 and num_classes >= 2, got {in_features}, {num_classes}")
        self.config, self.in_features, self.num_classes = config, in_features, num_classes
        self.graph_op = config.graph_operator()
        self.k = config.k
        num_hops = config.k + 1
        width = config.hidden if config.pre_process else in_features
        self.input_dropout = nn.Dropout(config.input_dropout)
        self.pre = nn.ModuleList(
            MLP(in_features, config.hidden, config.hidden, 2, config.dropout, batch_norm=config.batch_norm)
            for _ in range(num_hops)
        ) if config.pre_process else None
        official = config.output_net == "official"
        if config.attention == "jk" and official:
            # JK_GAMLP: the reference is FeedForwardNetII(K*d -> hidden -> hidden), then ReLU and dropout
            reference = FeedForwardNetII(width * num_hops, config.hidden, config.hidden, config.jk_layers,
                                         config.dropout)
            self.attention = get_message_op("jk_attention", in_features=width, num_hops=num_hops,
                                            hidden=config.hidden, num_layers=config.jk_layers, act=config.act,
                                            att_dropout=config.att_dropout, dropout=config.dropout,
                                            reference_net=reference, reference_dim=config.hidden)
        elif config.attention == "jk":
            # dropout stays 0 here (a known difference from JK_GAMLP, kept for the figures measured with it)
            self.attention = get_message_op("jk_attention", in_features=width, num_hops=num_hops,
                                            hidden=config.hidden, num_layers=config.jk_layers, act=config.act,
                                            att_dropout=config.att_dropout)
        else:
            self.attention = get_message_op("recursive_attention", in_features=width, num_hops=num_hops,
                                            act=config.act, att_dropout=config.att_dropout)
        self.residual = nn.Linear(in_features, width, bias=False) if config.residual else None
        self.act = nn.PReLU()
        self.dropout = nn.Dropout(config.dropout)
        self.output: nn.Module = (
            FeedForwardNetII(width, config.hidden, num_classes, config.num_layers, config.dropout) if official
            else MLP(width, config.hidden, num_classes, config.num_layers, config.dropout,
                     batch_norm=config.batch_norm))
        self.label_mlp = MLP(num_classes, config.hidden, num_classes, config.label_layers, config.dropout,
                             input_dropout=config.label_dropout) if config.label_hops > 0 else None

    # ------------------------------------------------------------------ SGAP stages
    @torch.no_grad()
    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, *,
                   label_matrix: Optional[torch.Tensor] = None,
                   cache_dir: Optional[Union[str, os.PathLike]] = None, progress: bool = False) -> NodeFeatures:
        """Hops ``[X, ..., Â^K X]`` (+ the propagated label input when ``label_hops > 0``).

        ``label_matrix`` overrides the label input's seed (RLU passes training one-hots plus
        confident soft predictions); by default it is the training nodes' one-hot labels.
        """
        x = graph.x if x is None else x
        if x is None:
            raise ConfigError("the graph has no node features (graph.x); pass x=...")
        if self.config.normalize_features:
            x = row_normalize(x)
        hops: List[torch.Tensor] = propagate_hops(graph, x, self.k, self.graph_op, cache_dir=cache_dir,
                                                  progress=progress)
        features = NodeFeatures(hops)
        if self.label_mlp is None:
            return features
        return self.with_label_input(features, graph, train_label_matrix(graph) if label_matrix is None
                                     else label_matrix)

    def with_label_input(self, features: NodeFeatures, graph: Any, label_matrix: torch.Tensor) -> NodeFeatures:
        """The same feature hops with a label input propagated from ``label_matrix`` (used by RLU)."""
        if self.label_mlp is None:
            raise ConfigError("this GAMLP has no label input (label_hops=0); RLU needs label_hops >= 1")
        if label_matrix.shape != (graph.num_nodes, self.num_classes):
            raise FeatureError(f"label_matrix must be [{graph.num_nodes}, {self.num_classes}], "
                               f"got {tuple(label_matrix.shape)}")
        hops = list(features.data[:self.k + 1])
        return NodeFeatures(hops + [propagate_labels(graph, label_matrix, self.config.label_hops)])

    def forward(self, batch: List[torch.Tensor]) -> torch.Tensor:
        num_hops = self.k + 1
        hops, label = batch[:num_hops], batch[num_hops] if self.label_mlp is not None else None
        hops = [self.input_dropout(h) for h in hops]
        inputs = [mlp(h) for mlp, h in zip(self.pre, hops)] if self.pre is not None else hops
        z = self.attention(inputs)
        if self.residual is not None:
            z = z + self.residual(hops[0])
        # as in the official code, the PReLU + dropout after the attention come with the residual
        out = self.output(self.dropout(self.act(z)) if self.residual is not None else z)
        if label is not None:
            out = out + self.label_mlp(label)
        return out

    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor:
        return logits

    def reset_parameters(self) -> None:
        for module in self.modules():
            if module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def __repr__(self) -> str:
        cfg = self.config
        return (f"GAMLP(in_features={self.in_features}, num_classes={self.num_classes}, k={cfg.k}, "
                f"attention={cfg.attention}, hidden={cfg.hidden}, label_hops={cfg.label_hops}, "
                f"output_net={cfg.output_net})")
