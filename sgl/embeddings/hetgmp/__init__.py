"""HET-GMP: graph-partitioned embedding training with replication and bounded-async sync.

:class:`Bigraph` (samples x embeddings) -> :func:`partition_bigraph` (placement of
samples and embeddings) -> :func:`select_replicas` (mirrors within a storage
budget) -> :class:`GMPEmbedding` workers (:func:`simulated_cluster` in one
process, :func:`distributed_embedding` over :mod:`sgl.comm`).
"""
from sgl.embeddings.hetgmp.bigraph import Bigraph
from sgl.embeddings.hetgmp.embedding import (
    GMPConfig, GMPEmbedding, GMPWorker, distributed_embedding, simulated_cluster,
)
from sgl.embeddings.hetgmp.partition import (
    Partition, PartitionConfig, comm_cost_matrix, partition_bigraph, random_partition, soft_count,
)
from sgl.embeddings.hetgmp.replication import replica_priority, select_replicas

__all__ = [
    "Bigraph", "Partition", "PartitionConfig", "comm_cost_matrix", "partition_bigraph",
    "random_partition", "soft_count", "replica_priority", "select_replicas",
    "GMPConfig", "GMPEmbedding", "GMPWorker", "simulated_cluster", "distributed_embedding",
]
