r"""Motif-based vertex embeddings: one typed config, one entry point, four methods.

* ``"walks"`` — DeepWalk on the motif-weighted graph :math:`W = \lambda S + (1 - \lambda) W_M`
  (:func:`~sgl.analytics.motifs.mixed_adjacency`): ``walks_per_node`` weighted walks of
  ``walk_length`` steps from every vertex, then skip-gram with negative sampling
  (:func:`~sgl.analytics.motifs.train_skipgram`). Walks are pulled into dense motif regions,
  so vertices that share many triangles get close vectors.
* ``"deepwalk"`` — the baseline: the same code with ``mix = 1`` (walks on the plain graph).
* ``"spectral"`` — Laplacian eigenmaps of the same ``W`` (:func:`~sgl.analytics.motifs.spectral_embedding`).
* ``"features"`` — standardised motif counts and centralities (:func:`~sgl.analytics.motifs.motif_features`);
  its width is fixed by the columns, so ``dim`` does not apply.

Options a method does not read are errors, never silently ignored.

    >>> import sgl
    >>> karate = sgl.datasets.load("karate")
    >>> config = MotifEmbeddingConfig(method="walks", dim=16, walks_per_node=4, walk_length=10)
    >>> motif_embedding(karate, config).shape
    torch.Size([34, 16])
    >>> motif_embedding(karate, MotifEmbeddingConfig(method="spectral", dim=4)).shape
    torch.Size([34, 4])
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, Optional

import numpy as np
import torch

from sgl._checks import check_bool, check_choice, check_int, check_real
from sgl.analytics.motifs.catalog import DIRECTED_MOTIFS, UNDIRECTED_MOTIFS
from sgl.analytics.motifs.features import motif_features
from sgl.analytics.motifs.skipgram import train_skipgram
from sgl.analytics.motifs.spectral import spectral_embedding
from sgl.analytics.motifs.walks import weighted_random_walks
from sgl.analytics.motifs.weighted import mixed_adjacency
from sgl.errors import ConfigError

__all__ = ["MotifEmbeddingConfig", "motif_embedding", "EMBEDDING_METHODS"]

EMBEDDING_METHODS = ("walks", "deepwalk", "spectral", "features")
_DEFAULT_DIM = 64
_DEFAULT_MIX = 0.5
_WALK_OPTIONS = ("walk_length", "walks_per_node", "window", "negatives", "epochs", "batch_size", "lr", "device")
#: options each method reads (besides method, motif, seed)
_READS = {
    "walks": {"motif", "dim", "mix"} | set(_WALK_OPTIONS),
    "deepwalk": {"dim"} | set(_WALK_OPTIONS),
    "spectral": {"motif", "dim", "mix"},
    "features": {"motif", "directed"},
}


@dataclass
class MotifEmbeddingConfig:
    """How to embed the vertices (see the module docstring for the methods).

    ``None`` means "the method's default": ``motif = "triangle"``, ``dim = 64``, ``mix = 0.5``
    (``deepwalk``: 1),
    and the walk options below. Giving an option the method does not read raises
    :class:`~sgl.errors.ConfigError` (e.g. ``dim`` with ``features``).
    """

    method: str = "walks"
    motif: Optional[str] = None
    dim: Optional[int] = None
    mix: Optional[float] = None
    walk_length: Optional[int] = None
    walks_per_node: Optional[int] = None
    window: Optional[int] = None
    negatives: Optional[int] = None
    epochs: Optional[int] = None
    batch_size: Optional[int] = None
    lr: Optional[float] = None
    device: Optional[str] = None
    directed: Optional[bool] = None
    seed: int = 0

    #: the walk options' defaults
    WALK_DEFAULTS = {"walk_length": 20, "walks_per_node": 10, "window": 5, "negatives": 5, "epochs": 1,
                     "batch_size": 256, "lr": 0.01, "device": None}

    def __post_init__(self) -> None:
        check_choice(self.method, "method", EMBEDDING_METHODS)
        check_int(self.seed, "seed", minimum=0)
        unread = sorted(f.name for f in fields(self) if f.name not in ("method", "seed")
                        and getattr(self, f.name) is not None and f.name not in _READS[self.method])
        if unread:
            raise ConfigError(f"the {self.method!r} embedding does not use {', '.join(f'`{n}`' for n in unread)}; "
                              f"drop {'it' if len(unread) == 1 else 'them'} (it reads: "
                              f"{', '.join(f'`{n}`' for n in sorted(_READS[self.method]))})")
        if self.motif is not None:
            check_choice(self.motif, "motif", UNDIRECTED_MOTIFS + DIRECTED_MOTIFS)
        if self.dim is not None:
            check_int(self.dim, "dim", minimum=1)
        if self.mix is not None:
            check_real(self.mix, "mix", 0.0, 1.0)
        for name in ("walk_length", "walks_per_node", "window", "negatives", "epochs", "batch_size"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name, minimum=1)
        if self.lr is not None:
            check_real(self.lr, "lr", 0.0, open_low=True)
        if self.directed is not None:
            check_bool(self.directed, "directed")

    def resolved(self, name: str) -> Any:
        """The value the method uses for option ``name`` (the default where unset)."""
        value = getattr(self, name)
        if value is not None:
            return value
        if name == "motif":
            return "triangle"
        if name == "dim":
            return _DEFAULT_DIM
        if name == "mix":
            return 1.0 if self.method == "deepwalk" else _DEFAULT_MIX
        if name == "directed":
            return False
        return self.WALK_DEFAULTS[name]

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def _walk_embedding(graph: Any, config: MotifEmbeddingConfig, progress: bool) -> torch.Tensor:
    opt = config.resolved
    weights = mixed_adjacency(graph, opt("motif"), opt("mix"))
    n = weights.shape[0]
    rng = np.random.default_rng(config.seed)
    start = np.repeat(np.arange(n), opt("walks_per_node"))
    walks = weighted_random_walks(weights, rng.permutation(start), opt("walk_length"), rng)
    return train_skipgram(walks, n, dim=opt("dim"), window=opt("window"), negatives=opt("negatives"),
                          epochs=opt("epochs"), batch_size=opt("batch_size"), lr=opt("lr"), seed=config.seed,
                          device=opt("device"), progress=progress)


def motif_embedding(graph: Any, config: Optional[MotifEmbeddingConfig] = None, progress: bool = False,
                    **options: Any) -> torch.Tensor:
    """``[num_nodes, dim]`` float32 vertex embeddings of ``graph`` by ``config.method``.

    Args:
        graph: an :class:`sgl.data.Graph` or a square scipy sparse matrix.
        config: a :class:`MotifEmbeddingConfig` (default: walks on the triangle-weighted graph).
        progress: progress bars over long steps.
        **options: fields of :class:`MotifEmbeddingConfig`, overriding ``config``'s.
    """
    config = config or MotifEmbeddingConfig()
    if options:
        unknown = sorted(set(options) - {f.name for f in fields(MotifEmbeddingConfig)})
        if unknown:
            raise ConfigError(f"unknown motif embedding option(s) {', '.join(unknown)}")
        config = MotifEmbeddingConfig(**{**{f.name: getattr(config, f.name) for f in fields(config)}, **options})
    if config.method in ("walks", "deepwalk"):
        return _walk_embedding(graph, config, progress)
    if config.method == "spectral":
        return spectral_embedding(mixed_adjacency(graph, config.resolved("motif"), config.resolved("mix")),
                                  config.resolved("dim"), seed=config.seed)
    return motif_features(graph, config.resolved("motif"), directed=config.resolved("directed"))[0]
