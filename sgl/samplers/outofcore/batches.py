"""The batches of out-of-core training: random, partition-based, and superbatches sampled ahead.

* :func:`random_batches` — an epoch's training nodes shuffled and cut (LRU, Ginex-like);
* :class:`Partitioning` and :func:`partition_groups` — OUTRE's *partition-based batches*:
  streaming FENNEL partitions balanced in training nodes; each epoch shuffles the partitions,
  takes groups of ``group_size``, shuffles the group's training nodes and cuts batches, so a
  batch's seeds share neighbours;
* :func:`superbatches` — batches sampled ahead of training in chunks whose Belady next-use plan
  fits its room (Ginex's superbatch);
* :func:`needed_positions` — the positions of a sampled batch whose feature rows it reads.

    >>> [b.tolist() for b in random_batches(np.arange(5), batch_size=2, seed=0, epoch=0)]
    [[1, 4], [3, 0], [2]]
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from sgl.samplers.block import MiniBatch
from sgl.samplers.caches import BeladyFeatureCache
from sgl.samplers.partition import cross_partition_degree, fennel_partition, fennel_two_level

__all__ = ["random_batches", "Partitioning", "partition_groups", "superbatches", "needed_positions"]


def _cut(nodes: np.ndarray, batch_size: int) -> List[np.ndarray]:
    return [nodes[i:i + batch_size] for i in range(0, nodes.size, batch_size)]


def random_batches(train_nodes: np.ndarray, batch_size: int, seed: int, epoch: int) -> List[np.ndarray]:
    """Epoch ``epoch``'s batches: the training nodes in a seeded random order, cut every ``batch_size``."""
    rng = np.random.default_rng([seed, epoch, 7])
    return _cut(train_nodes[rng.permutation(train_nodes.size)], batch_size)


@dataclass
class Partitioning:
    """A node partition and what OUTRE's batches and caches read from it.

    ``parts[v]`` is node ``v``'s partition, ``part_train[p]`` partition ``p``'s training nodes,
    ``part_nodes[p]`` all its nodes (only when asked for: the group CSR loads them),
    ``cross_degree[v]`` the neighbours of ``v`` outside its partition.
    """

    parts: np.ndarray
    num_parts: int
    part_train: List[np.ndarray]
    part_nodes: Optional[List[np.ndarray]]
    cross_degree: np.ndarray

    @classmethod
    def fennel(cls, store: Any, train_nodes: np.ndarray, num_parts: int, passes: int, patience: int,
               with_nodes: bool, prep: Dict[str, Any]) -> "Partitioning":
        """FENNEL partitions of ``store`` balanced in ``train_nodes`` (two-level above 64 partitions);
        the offline pass's time, bytes and edge locality are written to ``prep``."""
        train_mask = np.zeros(store.num_nodes, dtype=bool)
        train_mask[train_nodes] = True
        k = min(num_parts, store.num_nodes)
        start = time.perf_counter()
        indices = store.raw_indices()  # an offline pass over the file (reported as preprocessing)
        if k > 64:
            k1 = int(math.ceil(math.sqrt(k)))
            parts = fennel_two_level(store.indptr, indices, k1, int(math.ceil(k / k1)), train_mask,
                                     passes=passes, patience=patience)
        else:
            parts = fennel_partition(store.indptr, indices, k, train_mask, passes=passes, patience=patience)
        prep["partition_time_s"] = time.perf_counter() - start
        prep["partition_bytes_offline"] = int(indices.nbytes)
        count = int(parts.max()) + 1
        train_parts = parts[train_nodes]
        order = np.argsort(train_parts, kind="stable")
        bounds = np.searchsorted(train_parts[order], np.arange(count + 1))
        part_train = [train_nodes[order[bounds[p]:bounds[p + 1]]] for p in range(count)]
        part_nodes = None
        if with_nodes:
            by_part = np.argsort(parts, kind="stable")
            bounds = np.searchsorted(parts[by_part], np.arange(count + 1))
            part_nodes = [by_part[bounds[p]:bounds[p + 1]] for p in range(count)]
        cross = cross_partition_degree(store.indptr, indices, parts)
        prep["partition_inside_fraction"] = 1.0 - float(cross.sum()) / max(1, indices.size)
        return cls(parts, count, part_train, part_nodes, cross)


def partition_groups(partitioning: Partitioning, group_size: int, batch_size: int, seed: int,
                     epoch: int) -> List[Tuple[np.ndarray, List[np.ndarray]]]:
    """OUTRE's epoch: ``(partitions of the group, the group's batches)`` for every group."""
    rng = np.random.default_rng([seed, epoch, 11])
    order = rng.permutation(partitioning.num_parts)
    out: List[Tuple[np.ndarray, List[np.ndarray]]] = []
    for g in range(0, order.size, group_size):
        group = order[g:g + group_size]
        seeds = np.concatenate([partitioning.part_train[p] for p in group])
        batches = _cut(seeds[rng.permutation(seeds.size)], batch_size)
        if batches:
            out.append((group, batches))
    return out


def superbatches(seeds_list: Sequence[np.ndarray], sample: Callable[[int, np.ndarray], MiniBatch], limit: int,
                 plan_room: int) -> Iterator[List[Tuple[MiniBatch, np.ndarray]]]:
    """Sample ``seeds_list`` ahead in superbatches of ``(batch, its unique feature ids)``: up to
    ``limit`` batches whose Belady next-use plan fits ``plan_room`` bytes (a superbatch always holds
    at least one batch). ``sample(index, seeds)`` draws batch ``index``; each superbatch is sampled
    before the caller trains on it."""
    per_id = BeladyFeatureCache.PLAN_BYTES_PER_ID
    pending: List[Tuple[MiniBatch, np.ndarray]] = []
    index = 0
    while index < len(seeds_list) or pending:
        chunk, plan = pending, sum(t.size for _, t in pending) * per_id
        pending = []
        while index < len(seeds_list) and len(chunk) < limit:
            batch = sample(index, seeds_list[index])
            trace = batch.n_id.cpu().numpy()[needed_positions(batch)]
            index += 1
            if chunk and plan + trace.size * per_id > plan_room:
                pending = [(batch, trace)]  # opens the next superbatch
                break
            chunk.append((batch, trace))
            plan += trace.size * per_id
        yield chunk


def needed_positions(batch: MiniBatch) -> np.ndarray:
    """Positions in ``n_id`` whose features the batch reads: walking the blocks from the output
    back, a block's needed sources are its needed destinations and every node an edge into a
    needed destination reads; the last block's pruned sources come from the embedding cache.
    (A pruned node that no edge reads needs no features.)"""
    blocks = batch.blocks
    last = blocks[-1]
    used = np.zeros(last.num_src, dtype=bool)
    used[:last.num_dst] = True
    used[last.edge_index[0].cpu().numpy()] = True
    for block in reversed(blocks[:-1]):
        dst_used = used[:block.num_dst]  # the next block's sources are this block's destinations
        src, dst = block.edge_index.cpu().numpy()
        used = np.zeros(block.num_src, dtype=bool)
        used[:block.num_dst] = dst_used
        used[src[dst_used[dst]]] = True
    return np.flatnonzero(used)
