"""Graph queries and analytics: VEND edge non-existence codes in front of an on-disk edge store
(:mod:`sgl.analytics.vend`), and motif counting, centralities and motif-based embeddings
(:mod:`sgl.analytics.motifs`)."""

__all__: list = []

from sgl.analytics.vend import EdgeStore, PairType, VENDCodes, VENDStore  # noqa: E402

__all__ += ["VENDCodes", "PairType", "EdgeStore", "VENDStore"]

from sgl.analytics.motifs import (MotifCounts, MotifEmbeddingConfig, count_motifs, distributed_count_motifs,  # noqa: E402
                                  motif_adjacency, motif_degree, motif_embedding, motif_pagerank)

__all__ += ["MotifCounts", "count_motifs", "motif_adjacency", "motif_degree", "motif_pagerank",
            "MotifEmbeddingConfig", "motif_embedding", "distributed_count_motifs"]
