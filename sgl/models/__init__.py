"""Models: scalable (SGAP) GNNs built on the precompute -> train -> postprocess split, and more.

Besides the SGAP zoo (:data:`MODELS`): full-batch message-passing baselines, self-supervised
models (:mod:`sgl.models.ssl`), structure learners (:mod:`sgl.models.gsl`), CTR models, and
link decoders that score node pairs from an encoder's embeddings (:mod:`sgl.models.link_decoders`).
Models never train themselves: every training loop is in :mod:`sgl.tasks`, which drives them
through the declared :class:`ScalableModel` protocol (precompute / forward / postprocess / full_batch).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from sgl.errors import ConfigError
from sgl.models.accel import GraphFreeMLP, GraphFreeMLPConfig
from sgl.models.appnp import APPNP, APPNPConfig
from sgl.models.base import ScalableModel, SGAPConfig, SGAPModel
from sgl.models.ctr import CTR_MODELS, DCN, DLRM, WDL, CTRModelConfig, DeepFM, build_ctr_model
from sgl.models.features import FullGraphInput, NodeFeatures
from sgl.models.ffn_ii import Dense, FeedForwardNetII, InitialResidualDense
from sgl.models.gamlp import GAMLP, GAMLPConfig
from sgl.models.gbp import GBP, GBPConfig
from sgl.models.gsl import (
    RWGSL, STRUCTURE_LEARNERS, KNNGraph, KNNGraphConfig, NoStructureLearning, RWGSLConfig, structure_learner,
)
from sgl.models.message_passing import GAT, GCN, MESSAGE_PASSING_MODELS, GATConfig, GCNConfig, GraphSAGE, SAGEConfig
from sgl.models.link_decoders import LINK_DECODERS, HadamardMLPDecoder, InnerProductDecoder, build_link_decoder
from sgl.models.hetero import HETERO_MODELS, HGT, RGCN, SeHGNN, HeteroGAMLP, NARSSIGN, build_hetero_model
from sgl.models.mlp import MLP, ResMLP
from sgl.models.nafs import NAFS, NAFSConfig
from sgl.models.pasca import PaSCaV1, PaSCaV1Config, PaSCaV2, PaSCaV2Config, PaSCaV3, PaSCaV3Config
from sgl.models.presets import PRESETS, Preset, list_presets, preset
from sgl.models.presets import preset as _preset
from sgl.models.s2gc import S2GC, S2GCConfig
from sgl.models.sgc import SGC, SGCConfig
from sgl.models.sign import SIGN, SIGNConfig
from sgl.models.ssl import (
    DGI, GAE, GCMAE, SSL_MODELS, DGIConfig, GAEConfig, GCMAEConfig, build_ssl_model, gcmae_config, grace_config,
    graphmae_config, ssl_model_config,
)

__all__ = [
    "GraphFreeMLP", "GraphFreeMLPConfig",
    "ScalableModel", "SGAPModel", "SGAPConfig", "NodeFeatures", "FullGraphInput", "MLP", "ResMLP",
    "FeedForwardNetII", "Dense", "InitialResidualDense",
    "SGC", "SGCConfig", "SIGN", "SIGNConfig", "S2GC", "S2GCConfig", "GBP", "GBPConfig",
    "APPNP", "APPNPConfig", "NAFS", "NAFSConfig", "GAMLP", "GAMLPConfig",
    "PaSCaV1", "PaSCaV1Config", "PaSCaV2", "PaSCaV2Config", "PaSCaV3", "PaSCaV3Config",
    "GCN", "GCNConfig", "GraphSAGE", "SAGEConfig", "GAT", "GATConfig",
    "MODELS", "build_model", "model_config", "default_train_config", "preset", "list_presets", "Preset", "PRESETS",
    "RWGSL", "RWGSLConfig", "KNNGraph", "KNNGraphConfig", "NoStructureLearning", "STRUCTURE_LEARNERS",
    "structure_learner", "GCMAE", "GCMAEConfig", "gcmae_config", "graphmae_config", "grace_config", "DGI", "DGIConfig",
    "GAE", "GAEConfig", "SSL_MODELS", "build_ssl_model", "ssl_model_config",
    "WDL", "DeepFM", "DCN", "DLRM", "CTRModelConfig", "CTR_MODELS", "build_ctr_model",
    "NARSSIGN", "SeHGNN", "HeteroGAMLP", "RGCN", "HGT", "HETERO_MODELS", "build_hetero_model",
    "InnerProductDecoder", "HadamardMLPDecoder", "LINK_DECODERS", "build_link_decoder",
]

#: name -> (model class, config dataclass, one-line description)
MODELS: Dict[str, Tuple[type, type, str]] = {
    "sgap": (SGAPModel, SGAPConfig, "Any SGAP design (graph op, hops, message op, base model, post-processing); "
                                    "what `sgl search` exports"),
    "sgc": (SGC, SGCConfig, "Simplified graph convolution: linear model on A^K X (Wu et al. 2019)"),
    "sign": (SIGN, SIGNConfig, "SIGN: MLP on the concatenated hops X, AX, ..., A^K X (Frasca et al. 2020)"),
    "s2gc": (S2GC, S2GCConfig, "S2GC: Markov-diffusion filter over K hops + linear model (Zhu & Koniusz 2021)"),
    "gbp": (GBP, GBPConfig, "GBP: geometrically weighted hops + MLP (Chen et al. 2020)"),
    "appnp": (APPNP, APPNPConfig, "APPNP, decoupled: K personalised-PageRank steps + MLP (Klicpera et al. 2019)"),
    "nafs": (NAFS, NAFSConfig, "NAFS: node-adaptive feature smoothing + linear model (Zhang et al. 2022)"),
    "gamlp": (GAMLP, GAMLPConfig, "GAMLP: per-node attention over hops (JK or recursive) + MLP (Zhang et al. 2022)"),
    "pasca-v1": (PaSCaV1, PaSCaV1Config, "PaSca-V1: lazy PPR, learnable hop weights, residual MLP"),
    "pasca-v2": (PaSCaV2, PaSCaV2Config, "PaSca-V2: per-node gated hop weights, residual MLP"),
    "pasca-v3": (PaSCaV3, PaSCaV3Config, "PaSca-V3: V2 + PPR post-propagation of predictions"),
    "mlp": (GraphFreeMLP, GraphFreeMLPConfig, "Graph-free MLP on node features (+ optional position features); "
                                              "the GLNN student of `sgl train --distill-from` (Zhang et al. 2022)"),
    **MESSAGE_PASSING_MODELS,
}


def _lookup(name: str):
    key = str(name).lower().replace("_", "-")
    if key in HETERO_MODELS:  # heterogeneous models: built from a HeteroGraph (sgl.models.hetero)
        return HETERO_MODELS[key]
    if key not in MODELS:
        raise ConfigError(f"unknown model {name!r}; available: {', '.join(sorted(MODELS))} "
                          f"(heterogeneous graphs: {', '.join(HETERO_MODELS)})")
    return MODELS[key]


def model_config(name: str, preset: Optional[str] = None, **overrides: Any) -> Any:
    """The typed config of model ``name``: its defaults, then dataset ``preset``'s values
    (see :func:`preset`; an unknown pair raises), then ``overrides`` (unknown keys rejected).

    Example:
        >>> from sgl.models import model_config
        >>> model_config("sgc").k, model_config("sgc", preset="cora").k, model_config("sgc", preset="cora", k=1).k
        (2, 3, 1)
    """
    _, config_cls, _ = _lookup(name)
    values = {**(_preset(name, preset, strict=True)[0] if preset is not None else {}), **overrides}
    valid = set(config_cls.__dataclass_fields__)
    unknown = set(values) - valid
    if unknown:
        raise ConfigError(f"unknown option(s) {sorted(unknown)} for model {name!r}; valid: {sorted(valid)}")
    return config_cls(**values)


def default_train_config(name: str, preset: Optional[str] = None) -> Dict[str, Any]:
    """The model family's training defaults (fields of :class:`sgl.tasks.TrainConfig`), with
    dataset ``preset``'s training values on top when given.

    Example:
        >>> from sgl.models import default_train_config
        >>> default_train_config("sgc")["weight_decay"], default_train_config("sgc", preset="cora")["weight_decay"]
        (1.3e-05, 5e-05)
    """
    model_cls, _, _ = _lookup(name)
    base = dict(getattr(model_cls, "default_train_config", {}))
    return {**base, **(_preset(name, preset, strict=True)[1] if preset is not None else {})}


def build_model(name: str, in_features: int, num_classes: int, config: Any = None) -> Any:
    """Instantiate model ``name`` (e.g. ``"sgc"``) with its config (default config if None)."""
    model_cls, config_cls, _ = _lookup(name)
    return model_cls(in_features, num_classes, config or config_cls())
