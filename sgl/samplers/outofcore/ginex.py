"""The Ginex-like out-of-core baseline (Ginex, VLDB'22): :class:`GinexPolicy`.

Random batches; a static neighbour cache filled by degree (Ginex's score, the out/in-degree
ratio, is 1 for every node of a symmetric graph, so degree orders it); a feature cache with
Belady's optimal policy over a pre-sampled superbatch: the superbatch is sampled first, its id
trace planned, then replayed. A superbatch is the epoch (or ``superbatch`` batches), cut earlier
where its next-use plan would outgrow its room (a quarter of Ginex's room at most). With
``reset_caches`` the feature cache is rebuilt for every superbatch as Ginex's ``run_ginex.py`` does.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from sgl.samplers.block import MiniBatch
from sgl.samplers.outofcore.policy import OutOfCorePolicy

__all__ = ["GinexPolicy"]


class GinexPolicy(OutOfCorePolicy):
    """Random batches, a degree-ranked neighbour cache and Belady's feature cache over superbatches."""

    name = "ginex"
    feature_cache_name = "Belady"

    def build_caches(self, room: int) -> None:
        # a neighbour cache smaller than its share (every row fits) gives the rest to the feature cache
        neighbor_bytes = int(room * self.sampling.neighbor_cache_fraction)
        used = self._neighbor_cache(self.store.degree().astype(np.float64), neighbor_bytes)
        self._belady_cache(room - used)

    def epoch(self, epoch: int, first_iteration: int) -> Iterator[MiniBatch]:
        return self._superbatch_epoch(epoch, first_iteration)
