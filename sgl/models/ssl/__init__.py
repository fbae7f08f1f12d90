"""Self-supervised graph models: GCMAE, its GraphMAE-/GRACE-style ablations, DGI and GAE.

Rooms: :mod:`~sgl.models.ssl.config` (GCMAE's config and presets), :mod:`~sgl.models.ssl.losses`
(the loss terms), :mod:`~sgl.models.ssl.encoder` (the shared GNN encoder),
:mod:`~sgl.models.ssl.augment` (view augmentations), :mod:`~sgl.models.ssl.inputs` (checks and
feature preparation), :mod:`~sgl.models.ssl.gcmae` (the model),
:mod:`~sgl.models.ssl.baselines` (ablation configs, DGI, GAE) and
:mod:`~sgl.models.ssl.registry` (``SSL_MODELS``). The models compute losses and embeddings;
their pre-training loop is a task, :func:`sgl.tasks.ssl_pretraining.pretrain`.
"""
from sgl.models.ssl.augment import drop_nodes
from sgl.models.ssl.baselines import DGI, GAE, DGIConfig, GAEConfig, grace_config, graphmae_config
from sgl.models.ssl.config import GCMAE_PRESETS, GCMAEConfig, gcmae_config
from sgl.models.ssl.encoder import GNNEncoder
from sgl.models.ssl.gcmae import GCMAE
from sgl.models.ssl.inputs import check_ssl_graph, check_ssl_model_args, ssl_inputs
from sgl.models.ssl.losses import adjacency_loss, dense_adjacency_loss, info_nce, sce_loss, variance_loss
from sgl.models.ssl.registry import SSL_MODELS, build_ssl_model, ssl_model_config

__all__ = [
    "GCMAE", "GCMAEConfig", "GCMAE_PRESETS", "gcmae_config", "graphmae_config", "grace_config",
    "DGI", "DGIConfig", "GAE", "GAEConfig", "SSL_MODELS", "build_ssl_model", "ssl_model_config",
    "GNNEncoder", "sce_loss", "info_nce", "adjacency_loss", "dense_adjacency_loss", "variance_loss",
    "drop_nodes", "check_ssl_graph", "check_ssl_model_args", "ssl_inputs",
]
