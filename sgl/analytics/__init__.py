"""Graph queries and analytics: VEND edge non-existence codes in front of an on-disk edge store
(:mod:`sgl.analytics.vend`), and motif counting, centralities and motif-based embeddings
(:mod:`sgl.analytics.motifs`)."""

__all__: list = []
