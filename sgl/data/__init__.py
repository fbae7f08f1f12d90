"""Graph data: the :class:`Graph` type, its validation and conversions; :class:`HeteroGraph`;
the :class:`EdgeSplit` of link prediction."""
from sgl.data.graph import Graph
from sgl.data.edge_split import EdgeSplit
from sgl.data.hetero import EdgeType, HeteroGraph
from sgl.data.hetero_convert import HomogeneousView
from sgl.data.pyg_transform import PyGTransform, pyg_transform

__all__ = ["Graph", "EdgeSplit", "HeteroGraph", "EdgeType", "HomogeneousView", "PyGTransform", "pyg_transform"]
