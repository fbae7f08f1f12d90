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
]
__all__ += _message_all
