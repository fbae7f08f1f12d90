"""Samplers for mini-batch GNN training and out-of-core graphs.

In-memory samplers (:class:`NeighborSampler`, GraphSAINT, Cluster-GCN) and their loaders,
disk-backed graph/feature stores with an I/O-counting layer, and OUTRE's de-redundancy
(partition-based batches, historical embeddings, automatic cache space management) with
the LRU and Ginex-like baselines.
"""
from sgl.samplers.block import Block, MiniBatch
from sgl.samplers.loader import NodeLoader
from sgl.samplers.io import IOCounter
from sgl.samplers.store import (DiskAdjacency, FeatureStore, GraphStore, ResidentRows, StoreWriter, open_store,
                                write_store)
from sgl.samplers.subgraph import ClusterGCNSampler, GraphSAINTSampler, SubgraphLoader
from sgl.samplers.models import SampledGNN
from sgl.samplers.neighbor import CSRAdjacency, NeighborSampler, check_fanouts, sample_neighbors

__all__ = ["Block", "MiniBatch", "CSRAdjacency", "NeighborSampler", "check_fanouts", "sample_neighbors",
           "NodeLoader", "SampledGNN",
           "IOCounter", "DiskAdjacency", "FeatureStore", "GraphStore", "ResidentRows", "StoreWriter", "open_store",
           "write_store", "GraphSAINTSampler", "ClusterGCNSampler", "SubgraphLoader"]
