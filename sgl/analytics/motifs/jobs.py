"""Whole motif jobs on a named dataset, as ``sgl motifs count|embed`` runs them: load, compute, save.

    >>> import os, tempfile
    >>> out = os.path.join(tempfile.mkdtemp(), "karate.npz")
    >>> counts = run_motif_count(MotifCountJob("karate", out=out))
    >>> counts.totals["triangle"], MotifCounts.load(out).totals == counts.totals
    (45, True)
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch

from sgl._checks import check_bool, check_choice
from sgl.analytics.motifs.counts import count_motifs
from sgl.analytics.motifs.embedding import MotifEmbeddingConfig, motif_embedding
from sgl.analytics.motifs.products import ENGINES
from sgl.analytics.motifs.result import MotifCounts
from sgl.errors import ConfigError
from sgl.fileio import atomic_write

__all__ = ["MotifCountJob", "MotifEmbedJob", "run_motif_count", "run_motif_embedding", "load_graph",
           "save_embedding", "EMBEDDING_SUFFIXES"]

#: file types an embedding is written as
EMBEDDING_SUFFIXES = (".npy", ".pt")


def _suffix(path: Optional[str], allowed: tuple, what: str) -> None:
    if path is not None and os.path.splitext(str(path))[1].lower() not in allowed:
        raise ConfigError(f"cannot write {what} to {path!r}: the file name must end in {' or '.join(allowed)}")


@dataclass
class MotifCountJob:
    """Count the motifs of dataset ``dataset`` (read from ``root``) and write them to ``out``
    (``.npz`` or ``.csv``; nothing written when ``None``)."""

    dataset: str
    root: Optional[str] = None
    directed: bool = False
    out: Optional[str] = None
    engine: str = "numba"
    progress: bool = False

    def __post_init__(self) -> None:
        check_bool(self.directed, "directed")
        check_choice(self.engine, "engine", ENGINES)
        _suffix(self.out, (".npz", ".csv"), "motif counts")


@dataclass
class MotifEmbedJob:
    """Embed the vertices of ``dataset`` with ``embedding`` and write ``[n, dim]`` float32 to ``out``
    (``.npy`` or ``.pt``; nothing written when ``None``)."""

    dataset: str
    root: Optional[str] = None
    out: Optional[str] = None
    embedding: MotifEmbeddingConfig = field(default_factory=MotifEmbeddingConfig)
    progress: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.embedding, MotifEmbeddingConfig):
            raise ConfigError(f"embedding must be a MotifEmbeddingConfig, got {type(self.embedding).__name__}")
        _suffix(self.out, EMBEDDING_SUFFIXES, "an embedding")


def load_graph(dataset: str, root: Optional[str] = None) -> Any:
    """The single graph of a registered dataset (``sgl.datasets.load``); collections are an error."""
    import sgl.datasets
    from sgl.data import Graph

    graph = sgl.datasets.load(dataset, root=root)
    if not isinstance(graph, Graph):
        raise ConfigError(f"dataset {dataset!r} is a collection of graphs; motif jobs take one graph "
                          f"(a node- or link-level dataset such as karate, cora or facebook)")
    return graph


def run_motif_count(job: MotifCountJob) -> MotifCounts:
    """Load, count (:func:`~sgl.analytics.motifs.count_motifs`) and save; returns the counts."""
    counts = count_motifs(load_graph(job.dataset, job.root), directed=job.directed, progress=job.progress,
                          engine=job.engine)
    if job.out:
        counts.save(job.out)
    return counts


def save_embedding(embedding: torch.Tensor, path: str) -> None:
    """Write ``embedding`` atomically as ``.npy`` (numpy) or ``.pt`` (``torch.save``)."""
    _suffix(path, EMBEDDING_SUFFIXES, "an embedding")
    buffer = io.BytesIO()
    if str(path).lower().endswith(".npy"):
        np.save(buffer, embedding.numpy())
    else:
        torch.save(embedding, buffer)
    with atomic_write(path, "wb") as handle:
        handle.write(buffer.getvalue())


def run_motif_embedding(job: MotifEmbedJob) -> torch.Tensor:
    """Load, embed (:func:`~sgl.analytics.motifs.motif_embedding`) and save; returns the embedding."""
    embedding = motif_embedding(load_graph(job.dataset, job.root), job.embedding, progress=job.progress)
    if job.out:
        save_embedding(embedding, job.out)
    return embedding
