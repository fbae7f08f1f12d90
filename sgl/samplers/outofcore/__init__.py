"""Out-of-core mini-batch training from a disk store: batches and cache policies (LRU, Ginex-like, OUTRE).

Every policy trains the same :class:`~sgl.samplers.SampledGNN` with the same fan-outs, batch size and
memory budget on a :class:`~sgl.samplers.GraphStore`; every adjacency and feature read goes through the
store's counted I/O layer, so an epoch reports the bytes and requests it read from storage.

* :class:`LRUPolicy` (``"lru"``) — random batches, all neighbour lists from disk, the whole budget an LRU
  feature cache (the "PyG+" style baseline);
* :class:`GinexPolicy` (``"ginex"``) — random batches, a degree-ranked neighbour cache, Belady's feature
  cache over pre-sampled superbatches;
* :class:`OUTREPolicy` (``"outre"``) — OUTRE (VLDB'24): partition-based batches, a historical embedding
  cache with a staleness bound, and an automatic split of the budget between the caches.

:class:`OutOfCoreSampling` holds their options, :class:`OutOfCorePolicy` is the interface the training
loop (:class:`sgl.tasks.OutOfCoreTrainer`, with the run config :class:`sgl.tasks.OutOfCoreConfig`) talks
to, and :data:`POLICIES` maps a ``method`` name to its class.
"""
from sgl.samplers.outofcore.batches import (Partitioning, needed_positions, partition_groups, random_batches,
                                            superbatches)
from sgl.samplers.outofcore.config import OutOfCoreSampling
from sgl.samplers.outofcore.ginex import GinexPolicy
from sgl.samplers.outofcore.group_csr import GroupCSR
from sgl.samplers.outofcore.lru import LRUPolicy
from sgl.samplers.outofcore.outre import OUTREPolicy
from sgl.samplers.outofcore.policy import OutOfCorePolicy
from sgl.samplers.outofcore.registry import METHODS, POLICIES, make_policy, policy_class

__all__ = ["OutOfCoreSampling", "OutOfCorePolicy", "LRUPolicy", "GinexPolicy", "OUTREPolicy", "POLICIES", "METHODS",
           "policy_class", "make_policy", "random_batches", "Partitioning", "partition_groups", "superbatches",
           "needed_positions", "GroupCSR"]
