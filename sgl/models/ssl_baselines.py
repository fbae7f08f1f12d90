"""Backward-compatible path of :mod:`sgl.models.ssl`'s baselines (DGI, GAE) and its registry.

The baselines' pre-training loop (their ``fit``) is a task now:
:func:`sgl.tasks.ssl_pretraining.pretrain`.
"""
from sgl.models.ssl.baselines import (  # noqa: F401
    DGI, GAE, DGIConfig, GAEConfig, _check, _corruption, _GCNStack, _PyGWrapper, _summary, grace_config,
    graphmae_config,
)
from sgl.models.ssl.config import GCMAEConfig, gcmae_config  # noqa: F401
from sgl.models.ssl.encoder import GNNEncoder  # noqa: F401
from sgl.models.ssl.gcmae import GCMAE  # noqa: F401
from sgl.models.ssl.inputs import check_ssl_graph  # noqa: F401
from sgl.models.ssl.registry import SSL_MODELS, build_ssl_model, ssl_model_config

__all__ = ["DGIConfig", "DGI", "GAEConfig", "GAE", "SSL_MODELS", "build_ssl_model", "ssl_model_config"]
