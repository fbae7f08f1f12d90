"""The interface every out-of-core cache policy implements: :class:`OutOfCorePolicy`.

A policy owns the data path of out-of-core training: which batches an epoch has, the caches
in front of the store (neighbour lists, feature rows, historical embeddings), how they are sized
to the memory budget, and the per-epoch / per-superbatch hooks that keep them filled. The
training loop (:class:`sgl.tasks.OutOfCoreTrainer`) only calls :meth:`~OutOfCorePolicy.prepare`,
:meth:`~OutOfCorePolicy.epoch`, :meth:`~OutOfCorePolicy.gather` and
:meth:`~OutOfCorePolicy.finish_step`.

Budget accounting: ``memory_budget`` must hold every cache (values and index structures,
including Belady's next-use plan and OUTRE's group CSR) plus the working set of one batch (its
gathered feature rows), reserved from the largest batch of a sizing pass; the
:class:`~sgl.samplers.caches.MemoryBudget` is checked after every batch. A budget smaller than one
batch raises :class:`sgl.errors.ConfigError`.
"""
from __future__ import annotations

import abc
from typing import Any, ClassVar, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from sgl.errors import ConfigError
from sgl.samplers.block import MiniBatch
from sgl.samplers.caches import BeladyFeatureCache, HistoricalEmbeddingCache, MemoryBudget
from sgl.samplers.neighbor import NeighborSampler
from sgl.samplers.outofcore.batches import needed_positions, random_batches, superbatches
from sgl.samplers.store import GraphStore, ResidentRows

__all__ = ["OutOfCorePolicy"]


class OutOfCorePolicy(abc.ABC):
    """Batches and caches of one out-of-core method, sized to one memory budget.

    Args:
        sampling: an :class:`~sgl.samplers.outofcore.OutOfCoreSampling` (fan-outs, budget, cache options).
        batch_size: seeds per batch.
        seed: seeds the batch order and every sampling stream.

    Subclasses set :attr:`name` and implement :meth:`build_caches`; they may override
    :meth:`batches`, :meth:`before_sizing`, :meth:`epoch` and :meth:`validate`.
    """

    #: the ``method`` name this policy is registered under
    name: ClassVar[str] = ""
    #: the feature cache the policy always uses (named in the error when another one is asked for)
    feature_cache_name: ClassVar[str] = ""

    def __init__(self, sampling: Any, batch_size: int, seed: int) -> None:
        self.sampling, self.batch_size, self.seed = sampling, batch_size, seed
        self.cache: Any = None
        self.emb_cache: Optional[HistoricalEmbeddingCache] = None
        self.neighbor_cache: Optional[ResidentRows] = None
        self.prep: Dict[str, Any] = {}

    @classmethod
    def validate(cls, sampling: Any) -> None:
        """Reject options this policy does not take (called by ``OutOfCoreSampling``)."""
        if sampling.feature_cache == "belady":
            raise ConfigError(f"feature_cache='belady' is an OUTRE option ({sampling.method} always uses its own "
                              f"cache: {cls.feature_cache_name})")

    # ------------------------------------------------------------------ preparation
    def prepare(self, store: GraphStore, train_nodes: np.ndarray, width: int) -> Dict[str, Any]:
        """Open the store's readers, size the caches to the budget and fill what is filled up front;
        ``width`` is the model's last-layer input width (historical embeddings). Returns ``prep``."""
        self.store, self.train_nodes, self.width = store, train_nodes, width
        self.adjacency = store.adjacency()
        self.sampler = NeighborSampler(self.adjacency, self.sampling.fanouts)
        self.features = store.features()
        self.budget = MemoryBudget(self.sampling.budget_bytes)
        self.before_sizing()
        sizing = self._sizing_pass(self.batches(0))
        # the batch's gathered rows: 1.5x the largest sized batch, never above the hard bound
        # batch_size * prod(1 + fanout) (a batch larger than the reserve fails the run-time check)
        fanouts, budget = self.sampling.fanouts, self.sampling.budget_bytes
        bound = self.batch_size * int(np.prod([1 + f for f in fanouts]))
        self.reserve = int(min(1.5 * sizing, bound, store.num_nodes) * 4 * store.num_features)  # float32 rows
        if self.reserve >= budget:
            raise ConfigError(f"memory budget {budget:,} bytes is too small for one batch: a batch of "
                              f"{self.batch_size} seeds with fan-outs {fanouts} gathers about {self.reserve:,} "
                              f"bytes of features; raise --memory-budget or lower the batch size / fan-outs")
        self.build_caches(budget - self.reserve)
        self.budget.register("feature_cache", self.cache)
        if self.emb_cache is not None:
            self.budget.register("embedding_cache", self.emb_cache)
        self.budget.check(working_bytes=self.reserve, where="after preparation")
        return self.prep

    def before_sizing(self) -> None:
        """Work the batches depend on (OUTRE: partitioning), done before the sizing pass."""

    @abc.abstractmethod
    def build_caches(self, room: int) -> None:
        """Create ``self.cache`` (and any neighbour / embedding cache) within ``room`` bytes."""

    def _sizing_pass(self, batches: Sequence[np.ndarray], limit: int = 32) -> int:
        sizes = []
        for i, seeds in enumerate(batches[:limit]):
            batch = self.sampler.sample(seeds, rng=np.random.default_rng([self.seed, 1 << 21, i]))
            sizes.append(needed_positions(batch).size)
        self.mean_batch_rows = float(np.mean(sizes))
        return max(sizes)

    def _neighbor_cache(self, score: np.ndarray, nbytes: int) -> int:
        """Fill a static neighbour cache with the highest-scoring rows that fit in ``nbytes``;
        returns the bytes it takes (less than ``nbytes`` when every row fits)."""
        self.neighbor_cache = None
        if nbytes <= 0:
            return 0
        deg = self.store.degree()
        order = np.argsort(-score, kind="stable")
        row_cost = deg[order] * self.store.index_bytes + 16  # values + pointer + node id
        fixed = 8 * self.store.num_nodes + 8  # the node -> slot map, the pointer's last entry
        count = int(np.searchsorted(np.cumsum(row_cost), nbytes - fixed, side="right"))
        if count <= 0:
            return 0
        cache = ResidentRows.load(self.adjacency, order[:count], kind="neighbor_cache_fill")
        self.adjacency.resident.append(cache)
        self.budget.register("neighbor_cache", cache)
        self.neighbor_cache = cache
        return cache.nbytes

    def _belady_cache(self, room: int) -> None:
        """Split ``room`` between a superbatch's next-use plan (it counts against the budget) and
        Belady's cached rows. The plan gets room for one epoch's trace (estimated from the sizing pass,
        +30 %) but at most a quarter of the room; a superbatch is cut where its plan would overflow."""
        epoch_batches = len(self.batches(0))
        epoch_plan = 1.3 * self.mean_batch_rows * epoch_batches * BeladyFeatureCache.PLAN_BYTES_PER_ID
        if self.sampling.superbatch:
            epoch_plan *= min(1.0, self.sampling.superbatch / max(1, epoch_batches))
        self.plan_room = int(min(0.25 * room, epoch_plan))
        # per slot: the float32 row, node id (8 B) and next use (8 B); per node: a 4 B slot map
        store = self.store
        rows = max(0, (room - self.plan_room - 4 * store.num_nodes) // (4 * store.num_features + 16))
        self.cache = BeladyFeatureCache(self.features, rows)
        self.prep.update(superbatch_plan_bytes=self.plan_room, feature_rows=int(rows))

    # ------------------------------------------------------------------ an epoch
    def batches(self, epoch: int) -> List[np.ndarray]:
        """The seeds of every batch of ``epoch`` (random order by default)."""
        return random_batches(self.train_nodes, self.batch_size, self.seed, epoch)

    def sample(self, seeds: np.ndarray, epoch: int, index: int, iteration: int,
               stamps: Optional[np.ndarray] = None) -> MiniBatch:
        """Sample batch ``index`` of ``epoch``, to be trained at ``iteration``. With ``stamps`` (a copy of
        the embedding stamps) the batch is sampled before the batches in front of it have trained (a
        superbatch): pruning then reads the stamps those batches *will* have written, which this call
        advances the same way (a node computed at iteration ``t`` is stamped ``t`` by
        :meth:`finish_step`), so the batch is the one in-order sampling would draw."""
        prune, emb = None, self.emb_cache
        if emb is not None:
            prune = lambda nodes: emb.fresh(nodes, iteration, stamps)  # noqa: E731
        batch = self.sampler.sample(seeds, rng=np.random.default_rng([self.seed, epoch, index]), prune=prune)
        if emb is not None and stamps is not None:
            emb.plan_push(batch.computed_inputs, iteration, stamps)
        return batch

    def epoch(self, epoch: int, first_iteration: int) -> Iterator[MiniBatch]:
        """The batches of ``epoch`` in training order, the first trained at ``first_iteration``; the
        caller trains on each (and calls :meth:`finish_step`) before asking for the next."""
        for index, seeds in enumerate(self.batches(epoch)):
            yield self.sample(seeds, epoch, index, first_iteration + index)

    def _superbatch_epoch(self, epoch: int, first_iteration: int) -> Iterator[MiniBatch]:
        """An epoch on Belady's cache: superbatches sampled ahead (pruning planned on a copy of the
        embedding stamps), each one's id trace handed to the cache before its batches train."""
        seeds_list = self.batches(epoch)
        # the embedding stamps as the batches sampled so far will leave them
        stamps = self.emb_cache.stamp.copy() if self.emb_cache is not None else None
        sample = lambda index, seeds: self.sample(seeds, epoch, index, first_iteration + index, stamps)  # noqa: E731
        for chunk in superbatches(seeds_list, sample, self.sampling.superbatch or len(seeds_list), self.plan_room):
            self.cache.set_trace([t for _, t in chunk], refill=self.sampling.reset_caches)
            for batch, _ in chunk:
                yield batch

    # ------------------------------------------------------------------ a step
    def gather(self, batch: MiniBatch) -> Tuple[np.ndarray, torch.Tensor, Optional[torch.Tensor]]:
        """``(positions in n_id whose rows the batch reads, those rows, the pruned nodes' cached
        embeddings or None)``, read through the caches."""
        needed = needed_positions(batch)
        rows = self.cache.fetch(batch.n_id.cpu().numpy()[needed])
        pruned = batch.pruned.cpu().numpy()
        history = self.emb_cache.pull(pruned) if self.emb_cache is not None and pruned.size else None
        return needed, rows, history

    def finish_step(self, batch: MiniBatch, last_input: torch.Tensor, iteration: int, working_bytes: int) -> None:
        """After training on ``batch`` at ``iteration``: push its computed last-layer inputs to the
        embedding cache and check the budget with the batch's ``working_bytes``."""
        if self.emb_cache is not None:
            self.emb_cache.push(batch.computed_inputs, last_input, iteration)
        self.budget.check(working_bytes=working_bytes, where=f"at iteration {iteration}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(fanouts={self.sampling.fanouts}, budget={self.sampling.budget_bytes:,})"
