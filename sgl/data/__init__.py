"""Graph data: the :class:`Graph` type, its validation and conversions; :class:`HeteroGraph`."""
from sgl.data.graph import Graph
from sgl.data.hetero import EdgeType, HeteroGraph
from sgl.data.hetero_convert import HomogeneousView

__all__ = ["Graph", "HeteroGraph", "EdgeType", "HomogeneousView"]
