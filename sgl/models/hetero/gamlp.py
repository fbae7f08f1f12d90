r"""Heterogeneous GAMLP: GAMLP's receptive-field attention over NARS hop features (GAMLP's
ogbn-mag entry, "NARS-GAMLP").

Precompute: NARS features (:func:`sgl.ops.nars_propagate`) and, with ``label_hops > 0``,
the training labels propagated along every target-to-target metapath of length
``<= label_hops`` (own label removed) and averaged. Train: per hop, NARS's 1-D convolution
mixes the relation subsets, then :class:`~sgl.models.GAMLP` (JK or recursive attention over
the hops, optional residual, output MLP, label MLP added to the output):

.. math:: Z^{(l)} = \sum_s w^{(l)}_s \odot X^{(l)}_s, \qquad
          \hat y = \mathrm{GAMLP}(Z^{(0)}, \dots, Z^{(k)}; \bar Y)

RLU (:func:`sgl.tasks.rlu.train_rlu`) works through :meth:`HeteroGAMLP.with_label_input`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

import torch
from torch import nn

from sgl._checks import check_int
from sgl.models.dropout import use_fast_dropout
from sgl.models.features import NodeFeatures
from sgl.models.gamlp import GAMLP, GAMLPConfig
from sgl.models.hetero.packed import PackedHopFeatures, is_packed_batch, packed_forward
from sgl.models.hetero.common import (SubsetAggregator, check_hetero_common, input_width, prepare_x_dict,
                                      require_hetero, train_label_matrix)
from sgl.ops import enumerate_metapaths, metapath_label_features, nars_propagate, sample_relation_subsets

__all__ = ["HeteroGAMLP", "HeteroGAMLPConfig"]


@dataclass
class HeteroGAMLPConfig(GAMLPConfig):
    """:class:`~sgl.models.GAMLPConfig` plus NARS's ``num_subsets``/``subset_seed``, the fill of
    featureless types (``mean``, ``random`` or ``transe``), and ``label_hops`` read as the longest
    label metapath. ``pre_process`` (a per-hop 2-layer MLP before the attention) is on by default,
    as in GAMLP's ogbn-mag command: without it the attention scores and the output MLP see the
    raw, subset-mixed input features (1,902-d on ACM), and on ACM's 60 training nodes that model
    reached 0.74-0.75 seed-0/1 validation accuracy against 0.88 with it (docs/hetero.md)."""

    k: int = 3
    num_subsets: int = 8
    subset_seed: int = 0
    hidden: int = 256
    dropout: float = 0.5
    pre_process: bool = True
    label_hops: int = 2
    featureless: str = "mean"
    normalize_features: bool = False
    #: node types with different feature widths: each (reduced to at most this many columns) in its
    #: own block of one common width, so the first layer learns one projection per type
    #: (:func:`sgl.ops.align_type_features`); 0 = raise instead
    type_width: int = 256

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int(self.num_subsets, "HeteroGAMLP num_subsets", 1)
        check_hetero_common(self, "HeteroGAMLP")


class HeteroGAMLP(nn.Module):
    """GAMLP over NARS features on a :class:`~sgl.data.HeteroGraph` (see the module docstring).

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"p": 4, "a": 2}, {("a", "w", "p"): torch.tensor([[0, 1, 1], [0, 1, 2]])},
        ...     x_dict={"p": torch.randn(4, 3)}, target="p", y=torch.tensor([0, 1, 0, 1]), train_mask=[0, 1])
        >>> model = HeteroGAMLP(g, 2, HeteroGAMLPConfig(k=2, hidden=8))
        >>> model(model.precompute(g)[torch.arange(4)]).shape
        torch.Size([4, 2])
    """

    config_class = HeteroGAMLPConfig
    full_batch = False
    default_train_config = {"lr": 0.001, "weight_decay": 0.0, "epochs": 200, "patience": 50, "batch_size": 10000}

    def __init__(self, graph: Any, num_classes: int, config: Optional[HeteroGAMLPConfig] = None) -> None:
        super().__init__()
        graph = require_hetero(graph, "HeteroGAMLP")
        self.config = config = config or HeteroGAMLPConfig()
        self.num_classes = num_classes
        self.subsets = sample_relation_subsets(graph, config.num_subsets, seed=config.subset_seed)
        width = input_width(graph, config)
        self.in_features = width
        self.label_metapaths = [p for p in enumerate_metapaths(graph, config.label_hops, end_types=[graph.target])
                                if len(p) > 1] if config.label_hops else []
        self.aggregator = SubsetAggregator(config.k + 1, len(self.subsets), width)
        # the inner GAMLP sees aggregated hops; its label input is this model's metapath labels
        inner = GAMLPConfig(**{f: getattr(config, f) for f in GAMLPConfig.__dataclass_fields__})
        inner.label_hops = 1 if self.label_metapaths else 0
        # dropout masks from a parallel hash, not torch's one-thread bernoulli_ (a third of a step)
        self.gamlp = use_fast_dropout(GAMLP(width, num_classes, inner))

    @torch.no_grad()
    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, *, label_matrix: Optional[torch.Tensor] = None,
                   cache_dir: Any = None, progress: bool = False) -> NodeFeatures:
        """NARS hops ``[n_target, num_subsets, d]`` (+ the mean metapath label input)."""
        graph = require_hetero(graph, "HeteroGAMLP")
        hops = nars_propagate(graph, self.subsets, self.config.k, prepare_x_dict(graph, self.config),
                              progress=progress)
        # [S, n, d] per hop -> one [n, (k+1)·S·d] tensor (see sgl.models.hetero.packed)
        features = PackedHopFeatures.from_hops([h.transpose(0, 1) for h in hops])
        del hops
        if not self.label_metapaths:
            return features
        return self.with_label_input(features, graph, train_label_matrix(graph) if label_matrix is None
                                     else label_matrix)

    def with_label_input(self, features: NodeFeatures, graph: Any, label_matrix: torch.Tensor) -> NodeFeatures:
        """The same NARS hops with the label input rebuilt from ``label_matrix`` (used by RLU)."""
        if not self.label_metapaths:
            from sgl.errors import ConfigError

            raise ConfigError("this HeteroGAMLP has no label input (label_hops=0); RLU needs label_hops >= 1")
        labels = metapath_label_features(graph, label_matrix, self.config.label_hops, metapaths=self.label_metapaths)
        mean = torch.stack([labels[p] for p in self.label_metapaths]).mean(0)
        if isinstance(features, PackedHopFeatures):
            return features.with_label(mean)
        return NodeFeatures(list(features.data[:self.config.k + 1]) + [mean])

    def forward(self, batch: List[torch.Tensor]) -> torch.Tensor:
        """Logits of a batch: ``[hop_rows, label_rows]`` from :class:`PackedHopFeatures` (the fast
        path, :func:`~sgl.models.hetero.packed.packed_forward`), or the reference layout -- a list
        of ``[B, S, d]`` hops (+ the label input) -- through :meth:`reference_forward`."""
        if is_packed_batch(batch, self.config.k + 1):
            return packed_forward(self, batch)
        return self.reference_forward(batch)

    def reference_forward(self, batch: List[torch.Tensor]) -> torch.Tensor:
        """The model hop by hop: NARS's subset convolution per hop, then :class:`~sgl.models.GAMLP`."""
        num_hops = self.config.k + 1
        hops = self.aggregator(batch[:num_hops])
        return self.gamlp(hops + list(batch[num_hops:]))

    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor:
        return logits

    def reset_parameters(self) -> None:
        self.aggregator.reset_parameters()
        self.gamlp.reset_parameters()

    def __repr__(self) -> str:
        cfg = self.config
        return (f"HeteroGAMLP(subsets={len(self.subsets)}, k={cfg.k}, attention={cfg.attention}, "
                f"hidden={cfg.hidden}, label_metapaths={len(self.label_metapaths)}, num_classes={self.num_classes})")
