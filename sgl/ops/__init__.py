"""Graph operators, multi-hop propagation and message operators (the precompute stage of SGAP models).

Message operators live in :mod:`sgl.ops.message`; :mod:`sgl.ops.message_ops` is their old path.
"""
from sgl.ops.graph_ops import (
    OPERATORS,
    GraphOperator,
    HeatKernel,
    LazyAdjacency,
    NormalizedAdjacency,
    PersonalizedPageRank,
    get_operator,
    normalized_adjacency,
    row_normalize,
    spmm,
)
from sgl.ops.propagate import DEFAULT_CHUNK_BYTES, propagate_hops, propagation_cache_key
from sgl.ops.partition import (
    PARTITION_METHODS, GraphPartition, local_partition, partition_assignment, partition_graph,
)
from sgl.ops.dist_propagate import DistHops, HaloStats, dist_propagate_hops, gather_hops
from sgl.ops.kernels import FusedAdjacency, csr_spmm, fused_adjacency
from sgl.ops.reorder import bandwidth, rcm_order, reorder_graph
from sgl.ops.hetero import (
    fill_featureless,
    mean_adjacency,
    nars_propagate,
    relation_adjacency,
    sample_relation_subsets,
    type_neighbours,
)
from sgl.ops.hetero_align import align_type_features, aligned_width, type_blocks
from sgl.ops.hetero_embed import transe_embeddings, transe_loss
from sgl.ops.hetero_metapath import (
    check_metapath,
    enumerate_metapaths,
    metapath_features,
    metapath_label_features,
    metapath_name,
)
from sgl.ops.message import (
    MESSAGE_OPERATORS,
    ConcatHops,
    GatedHops,
    JKAttention,
    LastHop,
    LearnableWeightedHops,
    MaxHops,
    MeanHops,
    MessageOperator,
    MinHops,
    NodeAdaptiveSmoothing,
    ProjectedConcat,
    RecursiveAttention,
    SumHops,
    WeightedHops,
    get_message_op,
    stationary_features,
)
from sgl.ops.message import __all__ as _message_all

__all__ = [
    "GraphOperator",
    "NormalizedAdjacency",
    "PersonalizedPageRank",
    "HeatKernel",
    "LazyAdjacency",
    "OPERATORS",
    "get_operator",
    "normalized_adjacency",
    "row_normalize",
    "spmm",
    "propagate_hops",
    "propagation_cache_key",
    "DEFAULT_CHUNK_BYTES",
    "GraphPartition", "PARTITION_METHODS", "local_partition", "partition_assignment", "partition_graph",
    "DistHops", "HaloStats", "dist_propagate_hops", "gather_hops",
    "FusedAdjacency", "csr_spmm", "fused_adjacency", "bandwidth", "rcm_order", "reorder_graph",
    "fill_featureless", "transe_embeddings", "transe_loss", "align_type_features", "aligned_width", "type_blocks",
    "mean_adjacency",
    "nars_propagate",
    "relation_adjacency",
    "sample_relation_subsets",
    "type_neighbours",
    "check_metapath",
    "enumerate_metapaths",
    "metapath_features",
    "metapath_label_features",
    "metapath_name",
]
__all__ += _message_all
