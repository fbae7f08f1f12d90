"""Graph operators and multi-hop propagation (the precompute stage of SGAP models)."""
from sgl.ops.graph_ops import (
    OPERATORS,
    GraphOperator,
    HeatKernel,
    NormalizedAdjacency,
    PersonalizedPageRank,
    get_operator,
    normalized_adjacency,
    row_normalize,
    spmm,
)
from sgl.ops.propagate import DEFAULT_CHUNK_BYTES, propagate_hops, propagation_cache_key

__all__ = [
    "GraphOperator",
    "NormalizedAdjacency",
    "PersonalizedPageRank",
    "HeatKernel",
    "OPERATORS",
    "get_operator",
    "normalized_adjacency",
    "row_normalize",
    "spmm",
    "propagate_hops",
    "propagation_cache_key",
    "DEFAULT_CHUNK_BYTES",
]
