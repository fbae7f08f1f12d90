"""Embedding backends for recommendation models: full, hashed, quotient-remainder, CAFE, CAFE+, and
HET / HET-GMP workers over a parameter server (:mod:`sgl.embeddings.protocol`).

Every backend maps global ids int64 ``[..., F]`` to ``[..., F, dim]`` and reports its exact
footprint with ``memory_bytes()``. :func:`build_embedding` builds one by name at a
compression ratio, all spending exactly the same bytes.

Example:
    >>> import torch
    >>> from sgl.embeddings import build_embedding
    >>> [build_embedding(kind, 50_000, 16, ratio=10).memory_bytes() for kind in ("hash", "qr", "cafe", "cafe+")]
    [320000, 320000, 320000, 320000]
    >>> build_embedding("full", 1000, 8)(torch.tensor([[1, 2, 3]])).shape
    torch.Size([1, 3, 8])
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from sgl.embeddings.base import EmbeddingBackend, budget_bytes, check_ratio
from sgl.embeddings.cafe import CAFEEmbedding, CAFEPlusEmbedding, paper_hyperparameters, split_budget
from sgl.embeddings.hotsketch import HotSketch
from sgl.embeddings.hotsketch_plus import HotSketchPlus
from sgl.embeddings.sketches import CountMinTopK, SpaceSaving
from sgl.embeddings.tables import FieldHashEmbedding, FullEmbedding, HashEmbedding, QREmbedding, hash_ids
from sgl.embeddings import het, hetgmp
from sgl.embeddings.het import HETConfig, HETEmbedding, NoCacheEmbedding
from sgl.embeddings.hetgmp import GMPConfig, GMPEmbedding
from sgl.embeddings.protocol import PROTOCOL_EMBEDDINGS, ProtocolEmbedding, build_protocol_embedding
from sgl.errors import EmbeddingError

__all__ = [
    "EmbeddingBackend", "FullEmbedding", "HashEmbedding", "FieldHashEmbedding", "QREmbedding", "CAFEEmbedding",
    "CAFEPlusEmbedding",
    "HotSketch", "HotSketchPlus", "SpaceSaving", "CountMinTopK", "EMBEDDINGS", "build_embedding",
    "budget_bytes", "check_ratio", "split_budget", "paper_hyperparameters", "hash_ids",
    "het", "hetgmp", "HETConfig", "HETEmbedding", "NoCacheEmbedding", "GMPConfig", "GMPEmbedding",
    "PROTOCOL_EMBEDDINGS", "ProtocolEmbedding", "build_protocol_embedding",
]


def _full(num_embeddings: int, dim: int, ratio: float = 1.0, **options: Any) -> FullEmbedding:
    if check_ratio(ratio) != 1.0:
        raise EmbeddingError(f"a full table has compression ratio 1, got {ratio}; pick hash, qr, cafe or cafe+")
    return FullEmbedding(num_embeddings, dim, **options)


#: name -> builder(num_embeddings, dim, ratio, **options) of the tables that fit a byte budget
#: (``build_embedding`` also builds :data:`PROTOCOL_EMBEDDINGS`, HET and HET-GMP workers)
EMBEDDINGS: Dict[str, Callable[..., EmbeddingBackend]] = {
    "full": _full,
    "hash": HashEmbedding.from_ratio,
    "hash-field": FieldHashEmbedding.from_ratio,
    "qr": QREmbedding.from_ratio,
    "cafe": CAFEEmbedding.from_ratio,
    "cafe+": CAFEPlusEmbedding.from_ratio,
}


def build_embedding(kind: str, num_embeddings: int, dim: int, ratio: float = 1.0, **options: Any) -> EmbeddingBackend:
    """Backend ``kind`` (``full``, ``hash``, ``hash-field``, ``qr``, ``cafe``, ``cafe+``; ``het``, ``hetgmp``: a
    :class:`ProtocolEmbedding`) for ``num_embeddings`` ids at ``ratio``× compression (bytes =
    :func:`budget_bytes`; HET and HET-GMP take ratio 1); ``options`` go to its constructor."""
    key = str(kind).lower().replace("_", "-").replace("cafe-plus", "cafe+").replace("cafeplus", "cafe+")
    if key not in EMBEDDINGS and key not in PROTOCOL_EMBEDDINGS:
        raise EmbeddingError(f"unknown embedding backend {kind!r}; available: "
                             f"{', '.join([*EMBEDDINGS, *PROTOCOL_EMBEDDINGS])}")
    check_ratio(ratio)
    try:
        if key in PROTOCOL_EMBEDDINGS:  # workers over a parameter server, not a table within a byte budget
            return build_protocol_embedding(key, num_embeddings, dim, ratio, **options)
        return EMBEDDINGS[key](num_embeddings, dim, ratio=ratio, **options)
    except TypeError as exc:
        raise EmbeddingError(f"bad option for embedding backend {kind!r}: {exc}") from None
