"""Motifs: exact counts, motif-weighted adjacency, centralities, embeddings, distributed counting.

Every function takes an :class:`sgl.data.Graph` (or a square scipy sparse matrix) and works on
its simple 0/1 pattern (:mod:`~sgl.analytics.motifs.adjacency`); motif names are listed in
:mod:`~sgl.analytics.motifs.catalog`.

    >>> import sgl
    >>> from sgl.analytics.motifs import count_motifs, motif_pagerank
    >>> karate = sgl.datasets.load("karate")
    >>> count_motifs(karate).totals["triangle"]
    45
    >>> count_motifs(karate, directed=True).totals["M4"]   # every edge is mutual: triangles are M4
    45
"""
from sgl.analytics.motifs.catalog import (CLOSED_MOTIFS, DIRECTED_MOTIFS, MAN_CODES, MOTIF_EDGES, OPEN_MOTIFS,
                                          UNDIRECTED_MOTIFS, classify)
from sgl.analytics.motifs.centrality import motif_degree, motif_pagerank, weighted_pagerank
from sgl.analytics.motifs.counts import count_motifs
from sgl.analytics.motifs.distributed import distributed_count_motifs, gather_counts
from sgl.analytics.motifs.embedding import EMBEDDING_METHODS, MotifEmbeddingConfig, motif_embedding
from sgl.analytics.motifs.exchange import VertexPartition
from sgl.analytics.motifs.features import motif_features
from sgl.analytics.motifs.jobs import MotifCountJob, MotifEmbedJob, run_motif_count, run_motif_embedding, save_embedding
from sgl.analytics.motifs.result import MotifCounts
from sgl.analytics.motifs.skipgram import SkipGram, train_skipgram
from sgl.analytics.motifs.spectral import spectral_embedding
from sgl.analytics.motifs.walks import weighted_random_walks
from sgl.analytics.motifs.weighted import mixed_adjacency, motif_adjacency

__all__ = [
    "UNDIRECTED_MOTIFS", "DIRECTED_MOTIFS", "CLOSED_MOTIFS", "OPEN_MOTIFS", "MOTIF_EDGES", "MAN_CODES", "classify",
    "MotifCounts", "count_motifs",
    "motif_adjacency", "mixed_adjacency", "motif_degree", "motif_pagerank", "weighted_pagerank",
    "weighted_random_walks", "SkipGram", "train_skipgram", "spectral_embedding", "motif_features",
    "MotifEmbeddingConfig", "motif_embedding", "EMBEDDING_METHODS",
    "distributed_count_motifs", "gather_counts", "VertexPartition",
    "MotifCountJob", "MotifEmbedJob", "run_motif_count", "run_motif_embedding", "save_embedding",
]
