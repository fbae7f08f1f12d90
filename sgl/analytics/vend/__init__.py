"""VEND (Li et al., ICDE'23): vertex codes that certify edge non-existence, in front of an on-disk edge store.

* :class:`VENDCodes` — ``K`` 64-bit words per vertex; ``test(u, v)`` answers ``Neighbor``,
  ``NonNeighbor`` (never wrong) or ``Uncertain``; batch queries and update maintenance; bitmaps
  with a per-vertex optimal hash count (:class:`OneHashVENDCodes`: the paper's one hash);
* :class:`VertexBloomFilter`, :class:`OneHashBloomFilter`, :class:`EdgeBloomFilter`, :class:`RangeFilter` —
  baselines at equal bits;
* :class:`EdgeStore` — edges (and the codes) in SQLite; :class:`VENDStore` — the codes in front of it;
* :func:`certified_fraction`, :func:`sample_non_edges`, :func:`benchmark_store` — measurements;
* :class:`VENDBuildConfig` / :func:`build_vend_store`, :func:`query_pairs` — what ``sgl vend`` runs.

    >>> import numpy as np
    >>> from sgl.analytics.vend import VENDCodes
    >>> codes = VENDCodes.from_edges(np.array([[0, 1], [1, 2]]), k=1)
    >>> codes.test(0, 2).name, codes.test(1, 2).name
    ('NonNeighbor', 'Neighbor')
"""
from sgl.analytics.vend.adjacency import MemoryAdjacency
from sgl.analytics.vend.baselines import EdgeBloomFilter, OneHashBloomFilter, RangeFilter, VertexBloomFilter
from sgl.analytics.vend.codes import OneHashVENDCodes, PairType, VENDCodes
from sgl.analytics.vend.evaluate import (StoreBenchmark, benchmark_store, certified_fraction, sample_non_edges,
                                         sample_two_hop_non_edges)
from sgl.analytics.vend.front import QueryStats, UpdateResult, VENDStore
from sgl.analytics.vend.layout import CodeLayout
from sgl.analytics.vend.pipeline import PairAnswers, VENDBuildConfig, VENDBuildResult, build_vend_store, query_pairs
from sgl.analytics.vend.store import EdgeStore

__all__ = ["PairType", "VENDCodes", "OneHashVENDCodes", "CodeLayout", "MemoryAdjacency", "VertexBloomFilter", "OneHashBloomFilter",
           "EdgeBloomFilter", "RangeFilter", "EdgeStore", "VENDStore", "QueryStats", "UpdateResult",
           "certified_fraction", "sample_non_edges", "sample_two_hop_non_edges", "benchmark_store", "StoreBenchmark",
           "VENDBuildConfig", "VENDBuildResult", "build_vend_store", "PairAnswers", "query_pairs"]
