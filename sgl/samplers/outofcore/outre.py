r"""OUTRE (VLDB'24): :class:`OUTREPolicy`, out-of-core training without redundancy.

(a) *Partition-based batches* (:func:`~sgl.samplers.outofcore.partition_groups`): a batch's seeds
come from one group of ``group_size`` partitions, so they share neighbours; a static neighbour
cache is ranked by cross-partition degree; with ``group_csr`` each group's CSR
(:class:`~sgl.samplers.outofcore.GroupCSR`) is read when the group starts and sampled from first
(otherwise neighbour lists are read on demand).
(b) A *historical embedding cache* of last-layer inputs with a staleness bound: a fresh cached
first-hop node is not expanded (its subtree is neither sampled nor gathered) and its cached row
stands in for it.
(c) *Automatic cache space management*: profiling passes (sampling only) measure each node's
feature access frequency and, with the staleness rule simulated, the bytes pruning it actually
saves; a grid search over ``alpha`` splits the feature/embedding share of the budget to maximise
the estimated bytes saved (OUTRE weighs sampling vs gathering time with a measured ratio; we count
bytes, the quantity this module reports). See :meth:`OUTREPolicy.split_caches`.

Known simplifications: pruning needs >= 2 layers; a pruned node is expanded at no hop (its whole
subtree is dropped); with 3+ layers, where a sampled edge of a deeper block reads a pruned node,
its lower-layer representation comes from its own features alone (OUTRE's sampler does the
same), and a pruned node no edge reads costs no feature row.
"""
from __future__ import annotations

import math
from typing import Any, Iterator, List, Optional, Tuple

import numpy as np

from sgl.errors import ConfigError
from sgl.samplers.block import MiniBatch
from sgl.samplers.caches import HistoricalEmbeddingCache, StaticFeatureCache
from sgl.samplers.outofcore.batches import Partitioning, needed_positions, partition_groups
from sgl.samplers.outofcore.group_csr import GroupCSR
from sgl.samplers.outofcore.policy import OutOfCorePolicy

__all__ = ["OUTREPolicy"]


class OUTREPolicy(OutOfCorePolicy):
    """Partition-based batches, a cross-degree neighbour cache, historical embeddings and a feature
    cache (static by profiled frequency, or Belady's) sharing the budget by a split search."""

    name = "outre"

    @classmethod
    def validate(cls, sampling: Any) -> None:
        if sampling.feature_cache == "belady" and sampling.group_csr:
            raise ConfigError("feature_cache='belady' pre-samples whole superbatches, which a per-group CSR cannot "
                              "serve; use group_csr=False")

    # ------------------------------------------------------------------ batches
    def before_sizing(self) -> None:
        s = self.sampling
        # default: a group of `group_size` partitions holds about two batches of training nodes
        # (OUTRE's papers100M setting: 1.2M training nodes, 10,000 partitions, groups of 20, batch 1000)
        k = s.num_parts or max(1, int(round(self.train_nodes.size * s.group_size / (2 * self.batch_size))))
        self.partitioning = Partitioning.fennel(self.store, self.train_nodes, k, s.partition_passes,
                                                s.partition_patience, with_nodes=s.group_csr, prep=self.prep)

    def partition_groups(self, epoch: int) -> List[Tuple[np.ndarray, List[np.ndarray]]]:
        """``(partitions of the group, the group's batches)`` for every group of ``epoch``."""
        return partition_groups(self.partitioning, self.sampling.group_size, self.batch_size, self.seed, epoch)

    def batches(self, epoch: int) -> List[np.ndarray]:
        return [b for _, batches in self.partition_groups(epoch) for b in batches]

    def epoch(self, epoch: int, first_iteration: int) -> Iterator[MiniBatch]:
        if self.sampling.reset_caches:  # run_main.py re-creates both caches every epoch
            self.cache.clear()
            if self.emb_cache is not None:
                self.emb_cache.clear()
        if self.sampling.feature_cache == "belady":
            yield from self._superbatch_epoch(epoch, first_iteration)
        elif self.group is not None:
            index = 0
            try:
                for parts, group_batches in self.partition_groups(epoch):
                    self.load_group(parts)  # the group's CSR is read before its first batch
                    for seeds in group_batches:
                        yield self.sample(seeds, epoch, index, first_iteration + index)
                        index += 1
            finally:
                self.load_group(None)
        else:
            yield from super().epoch(epoch, first_iteration)

    def load_group(self, parts: Optional[np.ndarray]) -> None:
        """Make partitions ``parts`` the resident group CSR (None: drop it)."""
        self.group.load(self.adjacency, self.partitioning, parts, self.neighbor_cache)

    # ------------------------------------------------------------------ caches
    def build_caches(self, room: int) -> None:
        s, store = self.sampling, self.store
        self.group: Optional[GroupCSR] = None
        if s.group_csr:
            # an upper bound before the neighbour cache exists (every row of the largest partitions)
            group_bytes = GroupCSR.max_bytes(store, self.partitioning, s.group_size, None)
            if group_bytes >= room:
                raise ConfigError(f"memory budget {s.budget_bytes:,} bytes is too small for a partition group's CSR "
                                  f"({group_bytes:,} bytes) plus one batch ({self.reserve:,} bytes); raise "
                                  f"--memory-budget, lower group_size or turn group_csr off")
            room -= group_bytes
        neighbor_bytes = int(room * s.neighbor_cache_fraction)
        room -= self._neighbor_cache(self.partitioning.cross_degree.astype(np.float64), neighbor_bytes)
        if s.group_csr:
            # the tight bound: rows the neighbour cache holds are never loaded with a group
            room += group_bytes - GroupCSR.max_bytes(store, self.partitioning, s.group_size, self.neighbor_cache)
            self.group = GroupCSR(store.num_nodes)
            self.budget.register("group_csr", self.group)
        self.split_caches(room)

    def split_caches(self, room: int) -> None:
        """Profiling, then the grid search over the feature/embedding split of ``room`` bytes.

        * feature benefit ``b_f(v)``: access count of ``v``'s row in an unpruned profiling pass
          (``profile_epochs`` epochs of batches, sampling only) times the row's bytes;
        * embedding benefit ``b_e(v)``: the bytes pruning ``v`` saves (the rows and neighbour lists of the
          subtree it would grow, :meth:`subtree_bytes`), summed over the times ``v`` *is* pruned when the
          staleness rule is simulated with every node cacheable (a node whose cached value is always stale
          by its next use has no benefit; OUTRE's ``before * beta + after`` counts its subtree at every use),
          scaled so the sum equals the feature reads the simulated pruning removed;
        * ``alpha`` (share of ``room`` for embeddings) maximises top-``n_emb`` ``b_e`` + top-``n_feat``
          ``b_f``; the embedding set is the top ``b_e``; with ``profile_pruned`` the feature set is
          ranked by the access counts seen with that embedding set's pruning simulated.
        """
        s, store = self.sampling, self.store
        n, width = store.num_nodes, self.width
        freq = np.zeros(n, dtype=np.float64)
        row_bytes = store.feature_row_bytes
        profiled = [(e, i, seeds) for e in range(s.profile_epochs) for i, seeds in enumerate(self.batches(e))]
        for e, i, seeds in profiled:
            batch = self.sampler.sample(seeds, rng=np.random.default_rng([self.seed, 1 << 22, e, i]))
            freq[batch.n_id.cpu().numpy()[needed_positions(batch)]] += 1.0
        use_emb = s.embedding_cache and len(s.fanouts) > 1
        gain = np.zeros(n, dtype=np.float64)
        freq_all = None
        if use_emb:
            freq_all, gain = self.simulate_pruning(np.ones(n, dtype=bool))
            # a pruned subtree's rows are often read anyway (by other nodes of the batch): scale the
            # per-node estimates so that they add up to the reads pruning removed in the simulation
            # (OUTRE calibrates its benefit with one measured ratio, beta, in the same way)
            removed = max(0.0, float(freq.sum() - freq_all.sum())) * row_bytes
            if gain.sum() > 0:
                gain *= min(1.0, removed / float(gain.sum()))
            self.prep["embedding_gain_scale"] = float(min(1.0, removed / gain.sum())) if gain.sum() > 0 else 0.0
            self.prep["embedding_candidates"] = int(np.count_nonzero(gain > 0))
            if s.embedding_top < 1.0:
                positive = np.flatnonzero(gain > 0)
                keep = int(math.ceil(s.embedding_top * positive.size))
                gain[positive[np.argsort(-gain[positive], kind="stable")[keep:]]] = 0.0
        cum_f = np.concatenate([[0.0], np.cumsum(np.sort(freq * row_bytes)[::-1])])
        cum_e = np.concatenate([[0.0], np.cumsum(np.sort(gain)[::-1])])
        alphas = [s.embedding_fraction] if s.embedding_fraction is not None else \
            ([0.0] + [a / 100 for a in range(1, 100)] if use_emb else [0.0])
        best = (-1.0, 0.0, 0, 0)
        for alpha in alphas:
            n_emb = min(n, HistoricalEmbeddingCache.capacity_for(room * alpha, n, width)) if alpha > 0 else 0
            n_feat = min(n, StaticFeatureCache.capacity_for(room * (1 - alpha) - n, n, store.num_features))
            value = cum_e[n_emb] + cum_f[n_feat]
            if value > best[0]:
                best = (value, alpha, n_emb, n_feat)
        _, alpha, n_emb, n_feat = best
        emb_nodes = np.argsort(-gain, kind="stable")[:n_emb]
        emb_nodes = emb_nodes[gain[emb_nodes] > 0]
        if emb_nodes.size and s.profile_pruned:
            # nodes never pruned in the all-cacheable simulation behave the same in or out of the set
            if emb_nodes.size == int(np.count_nonzero(gain > 0)) and s.embedding_top == 1.0:
                freq = freq_all
            else:
                member = np.zeros(n, dtype=bool)
                member[emb_nodes] = True
                freq, _ = self.simulate_pruning(member)
        if emb_nodes.size:
            self.emb_cache = HistoricalEmbeddingCache(emb_nodes, n, width, s.staleness)
        self.prep.update(embedding_fraction=alpha, embedding_rows=int(emb_nodes.size),
                         profiled_batches=len(profiled))
        if s.feature_cache == "belady":
            # the embedding set is the split search's; every byte it leaves goes to Belady's plan and rows
            self._belady_cache(room - (self.emb_cache.nbytes if self.emb_cache is not None else 0))
            return
        feat_nodes = np.argsort(-freq, kind="stable")[:n_feat]
        feat_nodes = feat_nodes[freq[feat_nodes] > 0]
        self.cache = StaticFeatureCache(self.features, feat_nodes)
        self.prep.update(feature_rows=int(feat_nodes.size))

    def simulate_pruning(self, member: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Sampling only (no training) with the staleness rule applied to ``member`` nodes (one computed
        at iteration ``t`` is pruned until ``t + staleness``): ``1 + profile_epochs`` epochs, the first
        warming the simulated cache up. Returns per-node feature-row access counts and the bytes
        pruning saved (:meth:`subtree_bytes` per pruned occurrence), counted after the warm-up epoch."""
        s = self.sampling
        n = self.store.num_nodes
        cost = self.subtree_bytes(self.store.degree())
        stamp = np.full(n, -(1 << 40), dtype=np.int64)
        freq = np.zeros(n, dtype=np.float64)
        gain = np.zeros(n, dtype=np.float64)
        it = 0
        for epoch in range(1 + s.profile_epochs):
            for i, seeds in enumerate(self.batches(epoch)):
                now = it
                prune = lambda nodes: member[nodes] & (now - stamp[nodes] < s.staleness)  # noqa: E731
                batch = self.sampler.sample(seeds, rng=np.random.default_rng([self.seed, 1 << 23, epoch, i]),
                                            prune=prune)
                if epoch > 0:
                    freq[batch.n_id.cpu().numpy()[needed_positions(batch)]] += 1.0
                    pruned = batch.pruned.cpu().numpy()
                    gain[pruned] += cost[pruned]
                computed = batch.computed_inputs
                stamp[computed[member[computed]]] = now
                it += 1
        return freq, gain

    def subtree_bytes(self, deg: np.ndarray) -> np.ndarray:
        """Estimated bytes pruning each node (a first-hop node) saves: the feature rows of the subtree
        it would grow at hops ``1 .. L-1`` and the neighbour lists read to grow it. A node that enters
        at hop ``h`` draws ``min(deg, fanout_h)`` neighbours there and is expanded again at every later
        hop; deeper nodes are counted with the mean draw ``m_h`` (no overlap, which the calibration
        in :meth:`split_caches` corrects)."""
        fan, store = self.sampling.fanouts, self.store
        take = [float(np.minimum(deg, f).mean()) for f in fan]
        mean_deg = float(deg.mean())
        # rows[h] / lists[h]: rows and list reads below a node that is expanded from hop h on
        rows, lists = [0.0] * (len(fan) + 1), [0.0] * (len(fan) + 1)
        for h in range(len(fan) - 1, 0, -1):
            deeper_rows = sum(take[j] * (1 + rows[j + 1]) for j in range(h, len(fan)))
            rows[h], lists[h] = deeper_rows, (len(fan) - h) * mean_deg + sum(take[j] * lists[j + 1]
                                                                           for j in range(h, len(fan)))
        own_rows = sum(np.minimum(deg, fan[h]) * (1 + rows[h + 1]) for h in range(1, len(fan)))
        own_lists = (len(fan) - 1) * deg + sum(np.minimum(deg, fan[h]) * lists[h + 1] for h in range(1, len(fan)))
        return own_rows * store.feature_row_bytes + own_lists * store.index_bytes
