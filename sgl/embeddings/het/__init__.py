"""HET: per-worker embedding cache with bounded staleness over a sharded parameter server.

One worker = :class:`HETEmbedding` (an ``ids -> embeddings`` module) holding a
:class:`HETWorker` (protocol) and an :class:`EmbeddingCache` (LRU/LFU/pinned LFU),
talking to the server through a :class:`Transport`: the in-process
:class:`LocalTransport` (simulator with exact byte counts) or the multi-process
:class:`DistTransport` (over :mod:`sgl.comm`).  The bounded-staleness write-back
(:class:`StaleLines`, :class:`StalenessConfig`) is shared with :mod:`sgl.embeddings.hetgmp`.
"""
from sgl.embeddings.het.bounds import TrafficBound, het_traffic_bound, optimal_misses, steady_state_reduction
from sgl.embeddings.het.cache import POLICIES, CachePolicy, EmbeddingCache
from sgl.embeddings.het.embedding import (
    CacheCounters, HETConfig, HETEmbedding, HETWorker, NoCacheEmbedding, NoCacheWorker, WorkerEmbedding,
    check_ids,
)
from sgl.embeddings.het.server import PullReply, ServerShard, ShardedServer, init_rows
from sgl.embeddings.het.staleness import UPDATE_UNITS, PushPart, StaleLines, StalenessConfig
from sgl.embeddings.het.transport import (
    DistTransport, LocalTransport, TrafficStats, Transport,
)

__all__ = [
    "CachePolicy", "POLICIES", "EmbeddingCache",
    "CacheCounters", "HETConfig", "HETEmbedding", "HETWorker", "WorkerEmbedding", "NoCacheEmbedding", "NoCacheWorker",
    "check_ids", "StaleLines", "StalenessConfig", "PushPart", "UPDATE_UNITS",
    "PullReply", "ServerShard", "ShardedServer", "init_rows",
    "Transport", "LocalTransport", "DistTransport", "TrafficStats",
    "steady_state_reduction", "optimal_misses", "TrafficBound", "het_traffic_bound",
]
