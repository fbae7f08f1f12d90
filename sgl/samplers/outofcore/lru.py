"""The naive out-of-core baseline (PyG+ style): :class:`LRUPolicy`.

Random batches; every neighbour list is read from disk; the whole budget left after one batch is
an LRU feature cache.
"""
from __future__ import annotations

from sgl.samplers.caches import LRUFeatureCache
from sgl.samplers.outofcore.policy import OutOfCorePolicy

__all__ = ["LRUPolicy"]


class LRUPolicy(OutOfCorePolicy):
    """Random batches, no neighbour cache, an LRU feature cache filling the budget."""

    name = "lru"
    feature_cache_name = "LRU"

    def build_caches(self, room: int) -> None:
        # per slot: the float32 row, node id (8 B) and last-use time (8 B); per node: a 4 B slot map
        store = self.store
        rows = max(0, (room - 4 * store.num_nodes) // (4 * store.num_features + 16))
        self.cache = LRUFeatureCache(self.features, rows)
