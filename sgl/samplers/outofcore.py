r"""Out-of-core mini-batch training from a disk store: naive/LRU, Ginex-like and OUTRE.

All three methods train the same :class:`~sgl.samplers.SampledGNN` with the same fan-outs,
batch size and memory budget on a :class:`~sgl.samplers.GraphStore`; every adjacency and
feature read goes through the store's counted I/O layer, so an epoch reports the bytes and
requests it read from storage.

* ``"lru"`` — random batches; all neighbour lists read from disk; the whole budget is an
  LRU feature cache (the "PyG+" style baseline).
* ``"ginex"`` — random batches; a static neighbour cache filled by degree (Ginex's score,
  the out/in-degree ratio, is 1 for every node of a symmetric graph, so degree orders it),
  and a feature cache with Belady's optimal policy over a pre-sampled superbatch: the
  superbatch is sampled first, its id trace planned, then replayed. A superbatch is the epoch
  (or ``superbatch`` batches), cut earlier where its next-use plan would outgrow its room (a
  quarter of Ginex's room at most).
* ``"outre"`` — OUTRE (VLDB'24): (a) *partition-based batches*: streaming FENNEL partitions
  (two-level above 64 partitions) balanced in training nodes; each epoch shuffles the
  partitions, takes groups of ``group_size``, shuffles the group's training nodes and cuts
  batches, so a batch's seeds share neighbours; a static neighbour cache ranked by
  cross-partition degree; with ``group_csr`` each group's CSR (full neighbour lists of the
  group's nodes outside the neighbour cache) is read when the group starts and sampled from
  first (otherwise neighbour lists are read on demand); (b) a *historical embedding cache* of
  last-layer inputs with a staleness bound: a fresh cached first-hop node is not expanded (its
  subtree is neither sampled nor gathered) and its cached row stands in for it; (c) *automatic
  cache space management*: profiling passes (sampling only) measure each node's feature access
  frequency and, with the staleness rule simulated, the bytes pruning it actually saves; a grid
  search over ``alpha`` splits the feature/embedding share of the budget to maximise the
  estimated bytes saved (OUTRE weighs sampling vs gathering time with a measured ratio; we count
  bytes, the quantity this module reports). See :meth:`OutOfCoreTrainer._outre_caches`.

Budget accounting: ``memory_budget`` must hold every cache (values and index structures,
including Belady's next-use plan and OUTRE's group CSR) plus the working set of one batch (its
gathered feature rows), reserved from the largest batch of a sizing pass; :class:`~sgl.samplers.caches.MemoryBudget`
checks it after every batch. A budget smaller than one batch raises :class:`sgl.errors.ConfigError`.

Known simplifications: stores keep the original node order, so a group CSR is read row by row
(OUTRE's partition-ordered files read it sequentially). Pruning needs >= 2 layers; a pruned
node is expanded at no hop (its whole subtree is dropped); with 3+ layers, where a sampled edge
of a deeper block reads a pruned node, its lower-layer representation comes from its own
features alone (OUTRE's sampler does the same), and a pruned node no edge reads costs no
feature row.

Example:
    >>> import tempfile, os, sgl
    >>> from sgl.samplers import write_store, open_store
    >>> from sgl.samplers.outofcore import OutOfCoreConfig, OutOfCoreTrainer
    >>> store = open_store(write_store(sgl.datasets.load("karate"), os.path.join(tempfile.mkdtemp(), "k")))
    >>> cfg = OutOfCoreConfig(method="outre", fanouts=[3, 3], batch_size=2, memory_budget="1MB", epochs=2,
    ...                       hidden=8, num_parts=2, group_size=1)
    >>> trainer = OutOfCoreTrainer(store, cfg)
    >>> stats = trainer.train_epoch()
    >>> stats["bytes_read"] > 0, stats["batches"] == len(trainer.batches(0))
    (True, True)
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from numbers import Integral
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F

from sgl.errors import ConfigError, FeatureError
from sgl.samplers.block import MiniBatch
from sgl.samplers.caches import (BeladyFeatureCache, HistoricalEmbeddingCache, LRUFeatureCache, MemoryBudget,
                                 StaticFeatureCache, parse_bytes)
from sgl.samplers.models import SampledGNN
from sgl.samplers.neighbor import NeighborSampler, check_fanouts
from sgl.samplers.partition import cross_partition_degree, fennel_partition, fennel_two_level
from sgl.samplers.store import GraphStore, ResidentRows

__all__ = ["OutOfCoreConfig", "OutOfCoreTrainer", "METHODS"]

METHODS = ("lru", "ginex", "outre")


@dataclass
class OutOfCoreConfig:
    """Settings shared by all out-of-core methods (only ``method`` differs between them)."""

    method: str = "outre"
    fanouts: List[int] = field(default_factory=lambda: [10, 10])
    batch_size: int = 1000
    memory_budget: Union[str, int] = "256MB"
    #: share of the budget for the static neighbour cache (ginex, outre)
    neighbor_cache_fraction: float = 0.1
    #: OUTRE partitions (None: a group of ``group_size`` partitions holds about two batches)
    num_parts: Optional[int] = None
    #: partitions per group (OUTRE's default 20)
    group_size: int = 20
    #: OUTRE: FENNEL restreaming passes at most (stopping early, as OUTRE's partitioner does, once
    #: ``partition_patience`` passes in a row keep no more edges inside partitions); one streaming
    #: pass over shuffled ids keeps few edges inside, restreaming recovers the communities
    partition_passes: int = 3
    partition_patience: int = 2
    #: historical-embedding staleness bound in iterations (OUTRE's default 100)
    staleness: int = 100
    #: use the historical embedding cache (outre)
    embedding_cache: bool = True
    #: fraction of the feature+embedding share given to embeddings; None = automatic search
    embedding_fraction: Optional[float] = None
    #: OUTRE: share of the profiled first-hop nodes (ranked by embedding benefit) the embedding
    #: cache may hold; 1.0 = every node with a benefit (the split search alone decides)
    embedding_top: float = 1.0
    #: OUTRE: epochs of batches the profiling pass samples (OUTRE profiles one pass; on a graph
    #: with few batches per epoch more passes give steadier access counts)
    profile_epochs: int = 1
    #: OUTRE: load each partition group's CSR (the full neighbour lists of the group's nodes that
    #: the neighbour cache does not hold) when the group starts, and sample from it first; False
    #: reads each neighbour list on demand (the group CSR's bytes count as ``group_csr`` reads)
    group_csr: bool = False
    #: OUTRE: rank the feature cache by access frequency measured in a second profiling pass that
    #: simulates the embedding cache's pruning (False: frequencies of the unpruned pass)
    profile_pruned: bool = True
    #: Ginex superbatch in batches (0 = one epoch)
    superbatch: int = 0
    #: restart the caches as the official codes do: Ginex rebuilds its feature cache for every
    #: superbatch and fills it from storage with the superbatch's first distinct ids
    #: (run_ginex.py ``switch``/``fill_cache``); OUTRE empties its static feature cache and its
    #: embedding cache every epoch (run_main.py re-creates both). False keeps cached rows and
    #: embeddings across superbatches and epochs (warmer than either official code)
    reset_caches: bool = False
    #: OUTRE's feature cache: ``"static"`` (OUTRE's: the rows the profiling pass read most, filled
    #: on first miss) or ``"belady"`` (Ginex's policy over pre-sampled superbatches, the embedding
    #: cache's pruning planned ahead; batches, samples and training are identical to ``"static"``,
    #: only the feature reads differ). LRU and Ginex-like always use their own policy.
    feature_cache: str = "static"
    hidden: int = 64
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4
    epochs: int = 1
    conv: str = "sage"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"unknown out-of-core method {self.method!r}; choose one of {', '.join(METHODS)}")
        self.fanouts = check_fanouts(self.fanouts)
        for name in ("batch_size", "group_size", "staleness", "hidden", "epochs", "profile_epochs",
                     "partition_passes", "partition_patience"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in ("embedding_cache", "group_csr", "profile_pruned", "reset_caches"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        self.budget_bytes = parse_bytes(self.memory_budget)
        if not 0.0 <= self.neighbor_cache_fraction < 1.0:
            raise ConfigError(f"neighbor_cache_fraction must be in [0, 1), got {self.neighbor_cache_fraction}")
        if self.embedding_fraction is not None and not 0.0 <= self.embedding_fraction <= 1.0:
            raise ConfigError(f"embedding_fraction must be in [0, 1] or None, got {self.embedding_fraction}")
        if not 0.0 < self.embedding_top <= 1.0:
            raise ConfigError(f"embedding_top must be in (0, 1], got {self.embedding_top}")
        if self.superbatch < 0:
            raise ConfigError(f"superbatch must be >= 0 batches, got {self.superbatch}")
        if self.feature_cache not in ("static", "belady"):
            raise ConfigError(f"feature_cache must be 'static' or 'belady', got {self.feature_cache!r}")
        if self.feature_cache == "belady" and self.method != "outre":
            raise ConfigError(f"feature_cache='belady' is an OUTRE option ({self.method} always uses its own cache: "
                              f"{'Belady' if self.method == 'ginex' else 'LRU'})")
        if self.feature_cache == "belady" and self.group_csr:
            raise ConfigError("feature_cache='belady' pre-samples whole superbatches, which a per-group CSR cannot "
                              "serve; use group_csr=False")

    def to_dict(self) -> Dict[str, Any]:
        out = asdict(self)
        out.pop("budget_bytes", None)
        return out


def _split(store: GraphStore, name: str) -> np.ndarray:
    mask = getattr(store, f"{name}_mask")
    if mask is None or not bool(mask.any()):
        raise FeatureError(f"the store has no {name} nodes; write it from a graph with a {name}_mask")
    return mask.nonzero().flatten().numpy()


class OutOfCoreTrainer:
    """Train a :class:`SampledGNN` on a disk store with one of :data:`METHODS`.

    Construction runs the method's preparation (sizing pass; OUTRE: partitioning, profiling
    and the cache split; caches sized to the budget). Preparation I/O is reported in
    ``self.prep`` and excluded from epoch figures, except Ginex's superbatch pre-sampling,
    which is part of every epoch.
    """

    def __init__(self, store: GraphStore, config: Optional[OutOfCoreConfig] = None,
                 model: Optional[SampledGNN] = None) -> None:
        self.store, self.cfg = store, config or OutOfCoreConfig()
        cfg = self.cfg
        if store.y is None:
            raise FeatureError("the store has no labels; write it from a graph with integer labels")
        self.train_nodes, self.val_nodes, self.test_nodes = (_split(store, s) for s in ("train", "val", "test"))
        torch.manual_seed(cfg.seed)
        self.model = model or SampledGNN(store.num_features, store.num_classes, hidden=cfg.hidden,
                                         num_layers=len(cfg.fanouts), dropout=cfg.dropout, conv=cfg.conv)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.adjacency = store.adjacency()
        self.sampler = NeighborSampler(self.adjacency, cfg.fanouts)
        self.features = store.features()
        self.budget = MemoryBudget(cfg.budget_bytes)
        self.epoch = 0
        self.iteration = 0
        self._io_only = False
        self.prep: Dict[str, Any] = {}
        start_bytes = store.counter.stats()["bytes"]
        start = time.perf_counter()
        self._prepare()
        self.prep.update(time_s=time.perf_counter() - start, bytes_read=store.counter.stats()["bytes"] - start_bytes)

    # ------------------------------------------------------------------ batches
    def _random_batches(self, epoch: int) -> List[np.ndarray]:
        rng = np.random.default_rng([self.cfg.seed, epoch, 7])
        nodes = self.train_nodes[rng.permutation(self.train_nodes.size)]
        return [nodes[i:i + self.cfg.batch_size] for i in range(0, nodes.size, self.cfg.batch_size)]

    def partition_groups(self, epoch: int) -> List[Tuple[np.ndarray, List[np.ndarray]]]:
        """OUTRE's epoch: ``(partitions of the group, the group's batches)`` for every group."""
        rng = np.random.default_rng([self.cfg.seed, epoch, 11])
        order = rng.permutation(self.num_parts)
        out: List[Tuple[np.ndarray, List[np.ndarray]]] = []
        for g in range(0, order.size, self.cfg.group_size):
            group = order[g:g + self.cfg.group_size]
            seeds = np.concatenate([self.part_train[p] for p in group])
            seeds = seeds[rng.permutation(seeds.size)]
            batches = [seeds[i:i + self.cfg.batch_size] for i in range(0, seeds.size, self.cfg.batch_size)]
            if batches:
                out.append((group, batches))
        return out

    def _partition_batches(self, epoch: int) -> List[np.ndarray]:
        return [b for _, batches in self.partition_groups(epoch) for b in batches]

    def batches(self, epoch: int) -> List[np.ndarray]:
        return self._partition_batches(epoch) if self.cfg.method == "outre" else self._random_batches(epoch)

    @staticmethod
    def needed_positions(batch: MiniBatch) -> np.ndarray:
        """Positions in ``n_id`` whose features the batch reads: walking the blocks from the output
        back, a block's needed sources are its needed destinations and every node an edge into a
        needed destination reads; the last block's pruned sources come from the embedding cache.
        (A pruned node that no edge reads needs no features.)"""
        blocks = batch.blocks
        last = blocks[-1]
        used = np.zeros(last.num_src, dtype=bool)
        used[:last.num_dst] = True
        used[last.edge_index[0].numpy()] = True
        for block in reversed(blocks[:-1]):
            dst_used = used[:block.num_dst]  # the next block's sources are this block's destinations
            src, dst = block.edge_index.numpy()
            used = np.zeros(block.num_src, dtype=bool)
            used[:block.num_dst] = dst_used
            used[src[dst_used[dst]]] = True
        return np.flatnonzero(used)

    # ------------------------------------------------------------------ preparation
    def _sizing_pass(self, batches: Sequence[np.ndarray], limit: int = 32) -> int:
        sizes = []
        for i, seeds in enumerate(batches[:limit]):
            batch = self.sampler.sample(seeds, rng=np.random.default_rng([self.cfg.seed, 1 << 21, i]))
            sizes.append(self.needed_positions(batch).size)
        self._mean_batch_rows = float(np.mean(sizes))
        return max(sizes)

    def _neighbor_cache(self, score: np.ndarray, nbytes: int) -> int:
        """Fill a static neighbour cache with the highest-scoring rows that fit in ``nbytes``;
        returns the bytes it takes (less than ``nbytes`` when every row fits)."""
        self.neighbor_cache: Optional[ResidentRows] = None
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

    def _group_csr_bytes(self) -> int:
        """Bytes a group's CSR can take at most: the ``group_size`` largest partitions (their rows not
        in the neighbour cache) plus the shared slot map."""
        deg = self.store.degree()
        keep = np.ones(self.store.num_nodes, dtype=bool)
        if self.neighbor_cache is not None:
            keep[self.neighbor_cache.nodes] = False
        rows = np.bincount(self.parts, weights=keep, minlength=self.num_parts)
        values = np.bincount(self.parts, weights=deg * keep, minlength=self.num_parts)
        cost = values * self.store.index_bytes + 16 * rows
        top = np.sort(cost)[::-1][:self.cfg.group_size]
        return int(top.sum()) + 8 + 8 * self.store.num_nodes

    def _load_group(self, parts: Optional[np.ndarray]) -> None:
        """Replace the resident group CSR by the rows of partitions ``parts`` (None: drop it)."""
        holder = self._group
        if holder.rows is not None:
            self.adjacency.resident.remove(holder.rows)
            holder.rows.release()
            holder.rows = None
        if parts is None:
            return
        nodes = np.concatenate([self.part_nodes[p] for p in parts])
        if self.neighbor_cache is not None:
            nodes = nodes[self.neighbor_cache.slot[nodes] < 0]
        holder.rows = ResidentRows.load(self.adjacency, nodes, kind="group_csr", slot=holder.slot)
        self.adjacency.resident.insert(0, holder.rows)

    def _prepare(self) -> None:
        cfg, store = self.cfg, self.store
        row_bytes = 4 * store.num_features  # gathered rows are float32 in memory
        if cfg.method == "outre":
            self._partition()
        sizing = self._sizing_pass(self.batches(0))
        # the batch's gathered rows: 1.5x the largest sized batch, never above the hard bound
        # batch_size * prod(1 + fanout) (a batch larger than the reserve fails the run-time check)
        bound = cfg.batch_size * int(np.prod([1 + f for f in cfg.fanouts]))
        self.reserve = int(min(1.5 * sizing, bound, store.num_nodes) * row_bytes)
        if self.reserve >= cfg.budget_bytes:
            raise ConfigError(f"memory budget {cfg.budget_bytes:,} bytes is too small for one batch: a batch of "
                              f"{cfg.batch_size} seeds with fan-outs {cfg.fanouts} gathers about {self.reserve:,} "
                              f"bytes of features; raise --memory-budget or lower the batch size / fan-outs")
        room = cfg.budget_bytes - self.reserve
        self.neighbor_cache = None
        self._group: Optional[_GroupCSR] = None
        if cfg.method == "outre" and cfg.group_csr:
            # an upper bound before the neighbour cache exists (every row of the largest partitions)
            group_bytes = self._group_csr_bytes()
            if group_bytes >= room:
                raise ConfigError(f"memory budget {cfg.budget_bytes:,} bytes is too small for a partition group's CSR "
                                  f"({group_bytes:,} bytes) plus one batch ({self.reserve:,} bytes); raise "
                                  f"--memory-budget, lower group_size or turn group_csr off")
            room -= group_bytes
        neighbor_bytes = int(room * cfg.neighbor_cache_fraction) if cfg.method != "lru" else 0
        self.emb_cache: Optional[HistoricalEmbeddingCache] = None
        if cfg.method == "lru":
            # per slot: the float32 row, node id (8 B) and last-use time (8 B); per node: a 4 B slot map
            rows = max(0, (room - 4 * store.num_nodes) // (4 * store.num_features + 16))
            self.cache = LRUFeatureCache(self.features, rows)
        elif cfg.method == "ginex":
            # a neighbour cache smaller than its share (every row fits) gives the rest to the feature cache
            used = self._neighbor_cache(store.degree().astype(np.float64), neighbor_bytes)
            self._size_belady(room - used)
        else:
            used = self._neighbor_cache(self.cross_degree.astype(np.float64), neighbor_bytes)
            room -= used
            if cfg.group_csr:
                # the tight bound: rows the neighbour cache holds are never loaded with a group
                room += group_bytes - self._group_csr_bytes()
                self._group = _GroupCSR(store.num_nodes)
                self.budget.register("group_csr", self._group)
            self._outre_caches(room)
        self.budget.register("feature_cache", self.cache)
        if self.emb_cache is not None:
            self.budget.register("embedding_cache", self.emb_cache)
        self.budget.check(working_bytes=self.reserve, where="after preparation")

    def _partition(self) -> None:
        cfg, store = self.cfg, self.store
        train_mask = np.zeros(store.num_nodes, dtype=bool)
        train_mask[self.train_nodes] = True
        # default: a group of `group_size` partitions holds about two batches of training nodes
        # (OUTRE's papers100M setting: 1.2M training nodes, 10,000 partitions, groups of 20, batch 1000)
        k = cfg.num_parts or max(1, int(round(self.train_nodes.size * cfg.group_size / (2 * cfg.batch_size))))
        k = min(k, store.num_nodes)
        start = time.perf_counter()
        indices = store.raw_indices()  # an offline pass over the file (reported as preprocessing)
        if k > 64:
            k1 = int(math.ceil(math.sqrt(k)))
            parts = fennel_two_level(store.indptr, indices, k1, int(math.ceil(k / k1)), train_mask,
                                     passes=cfg.partition_passes, patience=cfg.partition_patience)
        else:
            parts = fennel_partition(store.indptr, indices, k, train_mask, passes=cfg.partition_passes,
                                     patience=cfg.partition_patience)
        self.prep["partition_time_s"] = time.perf_counter() - start
        self.prep["partition_bytes_offline"] = int(indices.nbytes)
        self.num_parts = int(parts.max()) + 1
        self.parts = parts
        train_parts = parts[self.train_nodes]
        order = np.argsort(train_parts, kind="stable")
        bounds = np.searchsorted(train_parts[order], np.arange(self.num_parts + 1))
        self.part_train = [self.train_nodes[order[bounds[p]:bounds[p + 1]]] for p in range(self.num_parts)]
        if cfg.group_csr:
            by_part = np.argsort(parts, kind="stable")
            bounds = np.searchsorted(parts[by_part], np.arange(self.num_parts + 1))
            self.part_nodes = [by_part[bounds[p]:bounds[p + 1]] for p in range(self.num_parts)]
        self.cross_degree = cross_partition_degree(store.indptr, indices, parts)
        self.prep["partition_inside_fraction"] = 1.0 - float(self.cross_degree.sum()) / max(1, indices.size)

    def _outre_caches(self, room: int) -> None:
        """Profiling, then the grid search over the feature/embedding split of ``room`` bytes.

        * feature benefit ``b_f(v)``: access count of ``v``'s row in an unpruned profiling pass
          (``profile_epochs`` epochs of batches, sampling only) times the row's bytes;
        * embedding benefit ``b_e(v)``: the bytes pruning ``v`` saves (the rows and neighbour lists of the
          subtree it would grow, :meth:`_subtree_bytes`), summed over the times ``v`` *is* pruned when the staleness rule is
          simulated with every node cacheable (a node whose cached value is always stale by its next
          use has no benefit; OUTRE's ``before * beta + after`` counts its subtree at every use),
          scaled so the sum equals the feature reads the simulated pruning removed;
        * ``alpha`` (share of ``room`` for embeddings) maximises top-``n_emb`` ``b_e`` + top-``n_feat``
          ``b_f``; the embedding set is the top ``b_e``; with ``profile_pruned`` the feature set is
          ranked by the access counts seen with that embedding set's pruning simulated.
        """
        cfg, store = self.cfg, self.store
        n, width = store.num_nodes, self.model.last_input_width
        freq = np.zeros(n, dtype=np.float64)
        row_bytes = store.feature_row_bytes
        profiled = [(e, i, seeds) for e in range(cfg.profile_epochs) for i, seeds in enumerate(self.batches(e))]
        for e, i, seeds in profiled:
            batch = self.sampler.sample(seeds, rng=np.random.default_rng([cfg.seed, 1 << 22, e, i]))
            freq[batch.n_id.numpy()[self.needed_positions(batch)]] += 1.0
        use_emb = cfg.embedding_cache and len(cfg.fanouts) > 1
        gain = np.zeros(n, dtype=np.float64)
        freq_all = None
        if use_emb:
            freq_all, gain = self._simulate_pruning(np.ones(n, dtype=bool))
            # a pruned subtree's rows are often read anyway (by other nodes of the batch): scale the
            # per-node estimates so that they add up to the reads pruning removed in the simulation
            # (OUTRE calibrates its benefit with one measured ratio, beta, in the same way)
            removed = max(0.0, float(freq.sum() - freq_all.sum())) * row_bytes
            if gain.sum() > 0:
                gain *= min(1.0, removed / float(gain.sum()))
            self.prep["embedding_gain_scale"] = float(min(1.0, removed / gain.sum())) if gain.sum() > 0 else 0.0
            self.prep["embedding_candidates"] = int(np.count_nonzero(gain > 0))
            if cfg.embedding_top < 1.0:
                positive = np.flatnonzero(gain > 0)
                keep = int(math.ceil(cfg.embedding_top * positive.size))
                gain[positive[np.argsort(-gain[positive], kind="stable")[keep:]]] = 0.0
        cum_f = np.concatenate([[0.0], np.cumsum(np.sort(freq * row_bytes)[::-1])])
        cum_e = np.concatenate([[0.0], np.cumsum(np.sort(gain)[::-1])])
        alphas = [cfg.embedding_fraction] if cfg.embedding_fraction is not None else \
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
        if emb_nodes.size and cfg.profile_pruned:
            # nodes never pruned in the all-cacheable simulation behave the same in or out of the set
            if emb_nodes.size == int(np.count_nonzero(gain > 0)) and cfg.embedding_top == 1.0:
                freq = freq_all
            else:
                member = np.zeros(n, dtype=bool)
                member[emb_nodes] = True
                freq, _ = self._simulate_pruning(member)
        if emb_nodes.size:
            self.emb_cache = HistoricalEmbeddingCache(emb_nodes, n, width, cfg.staleness)
        self.prep.update(embedding_fraction=alpha, embedding_rows=int(emb_nodes.size),
                         profiled_batches=len(profiled))
        if cfg.feature_cache == "belady":
            # the embedding set is the split search's; every byte it leaves goes to Belady's plan and rows
            self._size_belady(room - (self.emb_cache.nbytes if self.emb_cache is not None else 0))
            return
        feat_nodes = np.argsort(-freq, kind="stable")[:n_feat]
        feat_nodes = feat_nodes[freq[feat_nodes] > 0]
        self.cache = StaticFeatureCache(self.features, feat_nodes)
        self.prep.update(feature_rows=int(feat_nodes.size))

    def _simulate_pruning(self, member: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Sampling only (no training) with the staleness rule applied to ``member`` nodes (one computed
        at iteration ``t`` is pruned until ``t + staleness``): ``1 + profile_epochs`` epochs, the first
        warming the simulated cache up. Returns per-node feature-row access counts and the bytes
        pruning saved (:meth:`_subtree_bytes` per pruned occurrence), counted
        after the warm-up epoch."""
        cfg, store = self.cfg, self.store
        n = store.num_nodes
        deg = store.degree()
        cost = self._subtree_bytes(deg)
        stamp = np.full(n, -(1 << 40), dtype=np.int64)
        freq = np.zeros(n, dtype=np.float64)
        gain = np.zeros(n, dtype=np.float64)
        it = 0
        for epoch in range(1 + cfg.profile_epochs):
            for i, seeds in enumerate(self.batches(epoch)):
                now = it
                prune = lambda nodes: member[nodes] & (now - stamp[nodes] < cfg.staleness)  # noqa: E731
                batch = self.sampler.sample(seeds, rng=np.random.default_rng([cfg.seed, 1 << 23, epoch, i]),
                                            prune=prune)
                if epoch > 0:
                    freq[batch.n_id.numpy()[self.needed_positions(batch)]] += 1.0
                    pruned = batch.pruned.numpy()
                    gain[pruned] += cost[pruned]
                computed = batch.computed_inputs
                stamp[computed[member[computed]]] = now
                it += 1
        return freq, gain

    def _subtree_bytes(self, deg: np.ndarray) -> np.ndarray:
        """Estimated bytes pruning each node (a first-hop node) saves: the feature rows of the subtree
        it would grow at hops ``1 .. L-1`` and the neighbour lists read to grow it. A node that enters
        at hop ``h`` draws ``min(deg, fanout_h)`` neighbours there and is expanded again at every later
        hop; deeper nodes are counted with the mean draw ``m_h`` (no overlap, which the calibration
        in :meth:`_outre_caches` corrects)."""
        fan, store = self.cfg.fanouts, self.store
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

    # ------------------------------------------------------------------ training
    def _sample(self, seeds: np.ndarray, epoch: int, index: int,
                ahead: Optional[Tuple[int, np.ndarray]] = None) -> MiniBatch:
        """Sample batch ``index`` of ``epoch``. ``ahead=(iteration, stamps)`` samples it before the
        batches in front of it have trained (a superbatch): pruning then reads the embedding stamps
        those batches *will* have written, kept in ``stamps``, which this call advances the same way
        (a node computed at iteration ``t`` is stamped ``t`` by :meth:`_step`), so the batch is the one
        in-order sampling would draw."""
        prune, emb = None, self.emb_cache
        if emb is not None:
            it, stamps = ahead if ahead is not None else (self.iteration, None)
            prune = lambda nodes: emb.fresh(nodes, it, stamps)  # noqa: E731
        batch = self.sampler.sample(seeds, rng=np.random.default_rng([self.cfg.seed, epoch, index]), prune=prune)
        if emb is not None and ahead is not None:
            emb.plan_push(batch.computed_inputs, it, stamps)
        return batch

    def _step(self, batch: MiniBatch, io_only: bool = False) -> float:
        """Fetch the batch's rows, train on it (``io_only``: skip the model, push placeholder rows so
        the embedding stamps that decide later pruning are the same) and update the caches."""
        model, emb = self.model, self.emb_cache
        needed = self.needed_positions(batch)
        rows = self.cache.fetch(batch.n_id.numpy()[needed])
        pruned = batch.pruned.numpy()
        history = emb.pull(pruned) if emb is not None and pruned.size else None
        computed = batch.computed_inputs
        if io_only:
            loss = float("nan")
            last_input = torch.zeros(computed.size, model.last_input_width)
        else:
            x = torch.zeros(batch.n_id.numel(), self.store.num_features)
            x[torch.from_numpy(needed)] = rows
            x = model.transform_features(x)
            model.train()
            self.optimizer.zero_grad()
            out = model(x, batch.blocks, history)
            step_loss = F.cross_entropy(out, self.store.y[batch.output_nodes])
            step_loss.backward()
            self.optimizer.step()
            loss = float(step_loss.detach())
            last_input = model.last_input[:computed.size]
        if emb is not None:
            emb.push(computed, last_input, self.iteration)
        self.budget.check(working_bytes=rows.numel() * 4, where=f"at iteration {self.iteration}")
        self.iteration += 1
        return loss

    def train_epoch(self, io_only: bool = False) -> Dict[str, Any]:
        """One epoch; returns loss, time, and bytes/requests read from storage.

        ``io_only=True`` replays the epoch's storage traffic exactly (sampling, pruning, every
        cache) without the model's forward and backward passes: what is read depends only on the
        seeds, the samplers' random streams and the caches, never on the weights, so the byte and
        request figures equal a training epoch's (tested) at a fraction of the time. The loss is
        NaN, and the embedding cache then holds placeholder rows, so such a trainer refuses
        :meth:`evaluate`.
        """
        if io_only:
            self._io_only = True
        counter = self.store.counter
        before = {k: dict(v) for k, v in counter.by_kind().items()}
        emb = self.emb_cache
        emb_before = (emb.pulls, emb.pushes, emb.refreshes) if emb is not None else (0, 0, 0)
        start = time.perf_counter()
        epoch = self.epoch
        # dropout draws from torch's global generator: reseed per (seed, epoch) so an epoch does not
        # depend on what else ran in the process (e.g. another trainer compared against this one)
        torch.manual_seed(self.cfg.seed * 100_003 + epoch)
        seeds_list = self.batches(epoch)
        losses = []
        if self.cfg.method == "outre" and self.cfg.reset_caches:
            self.cache.clear()
            if self.emb_cache is not None:
                self.emb_cache.clear()
        if isinstance(self.cache, BeladyFeatureCache):
            # a superbatch: up to `superbatch` batches (0: the epoch) whose next-use plan fits its room
            limit = self.cfg.superbatch or len(seeds_list)
            per_id = BeladyFeatureCache.PLAN_BYTES_PER_ID
            pending: List[Tuple[MiniBatch, np.ndarray]] = []
            index = 0
            # OUTRE: the embedding stamps as the batches sampled so far will leave them
            stamps = self.emb_cache.stamp.copy() if self.emb_cache is not None else None
            first_iteration = self.iteration
            while index < len(seeds_list) or pending:
                chunk, plan = pending, sum(t.size for _, t in pending) * per_id
                pending = []
                while index < len(seeds_list) and len(chunk) < limit:
                    batch = self._sample(seeds_list[index], epoch, index, ahead=(first_iteration + index, stamps))
                    trace = batch.n_id.numpy()[self.needed_positions(batch)]
                    index += 1
                    if chunk and plan + trace.size * per_id > self._plan_room:
                        pending = [(batch, trace)]  # opens the next superbatch
                        break
                    chunk.append((batch, trace))
                    plan += trace.size * per_id
                self.cache.set_trace([t for _, t in chunk], refill=self.cfg.reset_caches)
                losses.extend(self._step(b, io_only) for b, _ in chunk)
        elif self._group is not None:
            index = 0
            try:
                for parts, group_batches in self.partition_groups(epoch):
                    self._load_group(parts)  # the group's CSR is read before its first batch
                    for seeds in group_batches:
                        losses.append(self._step(self._sample(seeds, epoch, index), io_only))
                        index += 1
            finally:
                self._load_group(None)
        else:
            for i, seeds in enumerate(seeds_list):
                losses.append(self._step(self._sample(seeds, epoch, i), io_only))
        elapsed = time.perf_counter() - start
        self.epoch += 1
        after = counter.by_kind()
        kinds = {k: {"bytes": v["bytes"] - before.get(k, {}).get("bytes", 0),
                     "requests": v["requests"] - before.get(k, {}).get("requests", 0)} for k, v in after.items()}
        kinds = {k: v for k, v in kinds.items() if v["bytes"] or v["requests"]}
        return {"epoch": epoch, "loss": float(np.mean(losses)), "time_s": elapsed, "batches": len(seeds_list),
                "bytes_read": sum(v["bytes"] for v in kinds.values()),
                "requests": sum(v["requests"] for v in kinds.values()), "by_kind": kinds,
                "feature_hit_rate": self.cache.hits / max(1, self.cache.hits + self.cache.misses),
                "peak_budget_bytes": self.budget.peak,
                # historical embeddings: rows pulled (pruned subtrees), pushed, and pushes that replaced
                # an earlier (stale) value of the same node
                "embedding_pulls": (emb.pulls if emb is not None else 0) - emb_before[0],
                "embedding_pushes": (emb.pushes if emb is not None else 0) - emb_before[1],
                "embedding_refreshes": (emb.refreshes if emb is not None else 0) - emb_before[2]}

    def _size_belady(self, room: int) -> None:
        """Split Ginex's room between the superbatch's next-use plan (it counts against the budget) and
        Belady's cached rows. The plan gets room for one epoch's trace (estimated from the sizing pass,
        +30 %) but at most a quarter of the room; a superbatch is cut where its plan would overflow."""
        epoch_plan = 1.3 * self._mean_batch_rows * len(self.batches(0)) * BeladyFeatureCache.PLAN_BYTES_PER_ID
        if self.cfg.superbatch:
            epoch_plan *= min(1.0, self.cfg.superbatch / max(1, len(self.batches(0))))
        self._plan_room = int(min(0.25 * room, epoch_plan))
        # per slot: the float32 row, node id (8 B) and next use (8 B); per node: a 4 B slot map
        rows = max(0, (room - self._plan_room - 4 * self.store.num_nodes) // (4 * self.store.num_features + 16))
        self.cache = BeladyFeatureCache(self.features, rows)
        self.prep.update(superbatch_plan_bytes=self._plan_room, feature_rows=int(rows))

    def fit(self, eval_fanouts: Optional[Sequence[int]] = None, max_eval_nodes: Optional[int] = None,
            progress: bool = False) -> Dict[str, Any]:
        """Train ``config.epochs`` epochs; report test accuracy at the best validation epoch,
        and the mean bytes/requests/time per epoch."""
        import copy

        best_val, best_state, best_epoch = -1.0, None, -1
        epochs = []
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=self.cfg.epochs, desc=f"{self.cfg.method} seed {self.cfg.seed}", leave=False, disable=None)
        for _ in range(self.cfg.epochs):
            stats = self.train_epoch()
            val = self.evaluate("val", max_nodes=max_eval_nodes, fanouts=eval_fanouts)
            stats["val_acc"] = val
            epochs.append(stats)
            if val > best_val:
                best_val, best_epoch = val, stats["epoch"]
                best_state = copy.deepcopy(self.model.state_dict())
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{stats['loss']:.3f}", val=f"{val:.3f}", MiB=f"{stats['bytes_read'] / 2**20:.1f}")
        if bar is not None:
            bar.close()
        self.model.load_state_dict(best_state)
        test = self.evaluate("test", max_nodes=max_eval_nodes, fanouts=eval_fanouts)
        mean = lambda key: float(np.mean([e[key] for e in epochs]))  # noqa: E731
        return {"method": self.cfg.method, "seed": self.cfg.seed, "best_epoch": best_epoch, "val_acc": best_val,
                "test_acc": test, "bytes_per_epoch": mean("bytes_read"), "requests_per_epoch": mean("requests"),
                "epoch_time_s": mean("time_s"), "peak_budget_bytes": self.budget.peak,
                "budget_bytes": self.budget.total, "prep": {k: v for k, v in self.prep.items()},
                "epochs": [{k: v for k, v in e.items() if k != "by_kind"} for e in epochs]}

    @torch.no_grad()
    def evaluate(self, split: str = "test", max_nodes: Optional[int] = None,
                 fanouts: Optional[Sequence[int]] = None) -> float:
        """Accuracy on ``split`` with fresh (uncached) sampled inference; its I/O is not counted
        in epoch figures (the counter is restored)."""
        if self._io_only:
            raise ConfigError("this trainer ran an io_only epoch (no training; its embedding cache holds placeholder "
                              "rows), so its accuracy means nothing; evaluate a trainer that ran train_epoch()")
        nodes = {"train": self.train_nodes, "val": self.val_nodes, "test": self.test_nodes}[split]
        if max_nodes is not None and nodes.size > max_nodes:
            nodes = np.sort(np.random.default_rng([self.cfg.seed, 99]).choice(nodes, max_nodes, replace=False))
        sampler = NeighborSampler(self.adjacency, list(fanouts) if fanouts else self.cfg.fanouts)
        counter = self.store.counter
        snapshot = {k: dict(v) for k, v in counter.by_kind().items()}
        self.model.eval()
        correct = 0
        try:
            for i in range(0, nodes.size, 4096):
                seeds = nodes[i:i + 4096]
                batch = sampler.sample(seeds, rng=np.random.default_rng([self.cfg.seed, 1 << 20, i]))
                x = self.model.transform_features(self.features.read(batch.n_id))
                pred = self.model(x, batch.blocks).argmax(1)
                correct += int((pred == self.store.y[batch.output_nodes]).sum())
        finally:
            counter.reset()
            for kind, value in snapshot.items():
                counter.record(kind, value["bytes"], value["requests"])
        return correct / nodes.size


class _GroupCSR:
    """The resident CSR of the current partition group and the slot map all groups share."""

    def __init__(self, num_nodes: int) -> None:
        self.slot = np.full(num_nodes, -1, dtype=np.int64)
        self.rows: Optional[ResidentRows] = None

    @property
    def nbytes(self) -> int:
        return int(self.slot.nbytes) + (self.rows.nbytes if self.rows is not None else 0)


