"""Backward-compatible path of :mod:`sgl.models.ssl` (GCMAE, its config, losses and encoder).

The pre-training loop that lived here (``GCMAE.fit``, ``run_pretraining``) is a task now:
:func:`sgl.tasks.ssl_pretraining.pretrain`.
"""
from sgl.models.ssl.augment import _drop_edges, _drop_feature_columns, drop_nodes  # noqa: F401
from sgl.models.ssl.baselines import grace_config, graphmae_config
from sgl.models.ssl.config import GCMAE_PRESETS, GCMAEConfig, gcmae_config
from sgl.models.ssl.encoder import GNNEncoder, _gat_propagate, _project, _sparse_dropout  # noqa: F401
from sgl.models.ssl.gcmae import GCMAE
from sgl.models.ssl.inputs import check_ssl_graph
from sgl.models.ssl.losses import (  # noqa: F401
    _SoftplusGramSum, adjacency_loss, dense_adjacency_loss, info_nce, sce_loss, variance_loss,
)

__all__ = [
    "GCMAEConfig",
    "GCMAE",
    "GNNEncoder",
    "GCMAE_PRESETS",
    "gcmae_config",
    "graphmae_config",
    "grace_config",
    "sce_loss",
    "info_nce",
    "adjacency_loss",
    "dense_adjacency_loss",
    "variance_loss",
    "drop_nodes",
    "check_ssl_graph",
]
