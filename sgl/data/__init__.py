"""Graph data: the :class:`Graph` type, its validation and conversions."""
from sgl.data.graph import Graph

__all__ = ["Graph"]
