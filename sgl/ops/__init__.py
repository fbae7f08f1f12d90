"""Graph operators and multi-hop propagation (the precompute stage of SGAP models)."""
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
from sgl.ops.message_ops import *  # noqa: F401,F403 -- message operators, names in message_ops.__all__

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
__all__ += message_ops.__all__  # noqa: F405 -- the submodule is bound by the import above
