"""Samplers for mini-batch GNN training and out-of-core graphs.

In-memory samplers (:class:`NeighborSampler`, GraphSAINT, Cluster-GCN) and their loaders,
distributed sampling over a partitioned graph (:class:`DistGraph`, :class:`DistNeighborSampler`),
disk-backed graph/feature stores with an I/O-counting layer, and the out-of-core cache policies
(:mod:`sgl.samplers.outofcore`): OUTRE's de-redundancy (partition-based batches, historical
embeddings, automatic cache space management) with the LRU and Ginex-like baselines. The
out-of-core training loop and its run config are :class:`sgl.tasks.OutOfCoreTrainer` and
:class:`sgl.tasks.OutOfCoreConfig`.
"""
from sgl.samplers.block import Block, MiniBatch
from sgl.samplers.dist_graph import PARTITION_METHODS, DistGraph, PartitionBook, partition_nodes
from sgl.samplers.distributed import DistNeighborSampler, SamplerTraffic
from sgl.samplers.caches import (BeladyFeatureCache, HistoricalEmbeddingCache, LRUFeatureCache, MemoryBudget,
                                 StaticFeatureCache, parse_bytes)
from sgl.samplers.io import IOCounter
from sgl.samplers.loader import NodeLoader
from sgl.samplers.neighbor import CSRAdjacency, NeighborSampler, check_fanouts, sample_neighbors
from sgl.samplers.outofcore import (POLICIES, GinexPolicy, LRUPolicy, OUTREPolicy, OutOfCorePolicy, OutOfCoreSampling,
                                    make_policy)
from sgl.samplers.partition import cross_partition_degree, fennel_partition, fennel_two_level
from sgl.samplers.store import (DiskAdjacency, FeatureStore, GraphStore, ResidentRows, StoreWriter, open_store,
                                write_store)
from sgl.samplers.subgraph import ClusterGCNSampler, GraphSAINTSampler, SubgraphLoader

__all__ = [
    "Block", "MiniBatch", "NodeLoader", "SampledGNN",
    "CSRAdjacency", "NeighborSampler", "check_fanouts", "sample_neighbors",
    "GraphSAINTSampler", "ClusterGCNSampler", "SubgraphLoader",
    "IOCounter", "GraphStore", "FeatureStore", "DiskAdjacency", "ResidentRows", "StoreWriter", "open_store",
    "write_store",
    "MemoryBudget", "parse_bytes", "LRUFeatureCache", "StaticFeatureCache", "BeladyFeatureCache",
    "HistoricalEmbeddingCache",
    "OutOfCoreSampling", "OutOfCorePolicy", "LRUPolicy", "GinexPolicy", "OUTREPolicy", "POLICIES", "make_policy",
    "fennel_partition", "fennel_two_level", "cross_partition_degree",
    "DistGraph", "PartitionBook", "partition_nodes", "PARTITION_METHODS", "DistNeighborSampler", "SamplerTraffic",
]

#: names that moved up to sgl.tasks with the training loop (samplers never import tasks)
_MOVED_TO_TASKS = {"OutOfCoreConfig", "OutOfCoreTrainer"}


def __getattr__(name: str):
    if name == "SampledGNN":
        # loaded on first use: it imports torch_geometric (seconds), which sampling alone never
        # needs, e.g. in every process of a distributed sampling job
        from sgl.samplers.models import SampledGNN

        globals()["SampledGNN"] = SampledGNN
        return SampledGNN
    if name in _MOVED_TO_TASKS:
        raise AttributeError(f"sgl.samplers.{name} moved to sgl.tasks.{name} (training loops live in sgl.tasks): "
                             f"use `from sgl.tasks import {name}`")
    raise AttributeError(f"module 'sgl.samplers' has no attribute {name!r}")
