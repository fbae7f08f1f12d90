"""A dataset of many small graphs with one label each, for graph classification.

:class:`sgl.data.Graph` carries *node* labels (``graph.y`` has one entry per node), so the
per-graph targets live next to the graphs, in :attr:`GraphDataset.labels`, instead of being
squeezed into each graph.
"""
from __future__ import annotations

from numbers import Integral
from typing import Any, Iterator, List, Optional, Sequence, Union

import torch

from sgl.data import Graph
from sgl.errors import DatasetError

__all__ = ["GraphDataset"]


class GraphDataset(Sequence[Graph]):
    r"""An indexable collection of :class:`~sgl.data.Graph` objects and their graph labels.

    Args:
        graphs (list[Graph]): the graphs.
        labels (Tensor): ``[num_graphs]`` integer classes, or ``[num_graphs]`` /
            ``[num_graphs, T]`` float targets for regression.
        name (str, optional): shown by ``repr``.

    Indexing with an ``int`` gives a :class:`Graph`; a slice, a list of ints, an index
    tensor or a boolean mask gives a new :class:`GraphDataset` (e.g. a train split).

    Example:
        >>> import torch
        >>> from sgl.data import Graph
        >>> from sgl.datasets import GraphDataset
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 3))
        >>> ds = GraphDataset([g, g, g], torch.tensor([0, 1, 1]))
        >>> len(ds), ds.num_classes, ds.num_features
        (3, 2, 3)
        >>> ds[torch.tensor([True, False, True])]
        GraphDataset(num_graphs=2, num_classes=2, num_features=3)
    """

    def __init__(self, graphs: Sequence[Graph], labels: Any, name: Optional[str] = None) -> None:
        graphs = list(graphs)
        for i, graph in enumerate(graphs):
            if not isinstance(graph, Graph):
                raise DatasetError(f"graphs[{i}] is a {type(graph).__name__}; a GraphDataset holds sgl.data.Graph objects")
        labels = torch.as_tensor(labels)
        if labels.dim() == 0 or labels.size(0) != len(graphs):
            raise DatasetError(
                f"labels has shape {tuple(labels.shape)} but there are {len(graphs)} graphs; "
                f"pass one label (or target row) per graph"
            )
        if not labels.is_floating_point():
            labels = labels.to(torch.int64)
        widths = {g.num_features for g in graphs}
        if len(widths) > 1:
            raise DatasetError(f"the graphs have different feature widths {sorted(widths)}; they must all match")
        self.graphs: List[Graph] = graphs
        self.labels: torch.Tensor = labels
        self.name = name

    def __len__(self) -> int:
        return len(self.graphs)

    def __iter__(self) -> Iterator[Graph]:
        return iter(self.graphs)

    def __getitem__(self, index: Any) -> Union[Graph, "GraphDataset"]:  # type: ignore[override]
        if isinstance(index, Integral) or (isinstance(index, torch.Tensor) and index.dim() == 0):
            return self.graphs[int(index)]
        if isinstance(index, slice):
            picked = torch.arange(len(self))[index]
        else:
            picked = torch.as_tensor(index)
            if picked.dtype == torch.bool:
                if picked.numel() != len(self):
                    raise DatasetError(f"a boolean mask over this dataset needs {len(self)} entries, got {picked.numel()}")
                picked = picked.nonzero().flatten()
            elif picked.is_floating_point():
                raise DatasetError(f"index a GraphDataset with ints, slices or bool masks, not {picked.dtype}")
            picked = picked.to(torch.int64).flatten()
        return GraphDataset([self.graphs[int(i)] for i in picked], self.labels[picked], name=self.name)

    @property
    def num_graphs(self) -> int:
        return len(self.graphs)

    @property
    def num_classes(self) -> int:
        """``max(label) + 1`` for integer labels; the number of targets for float labels."""
        if self.labels.is_floating_point():
            return int(self.labels.size(1)) if self.labels.dim() > 1 else 1
        return int(self.labels.max()) + 1 if self.labels.numel() else 0

    @property
    def num_features(self) -> int:
        return self.graphs[0].num_features if self.graphs else 0

    @property
    def num_nodes(self) -> int:
        """Total number of nodes over all graphs."""
        return sum(g.num_nodes for g in self.graphs)

    @property
    def num_edges(self) -> int:
        """Total number of (directed) edges over all graphs."""
        return sum(g.num_edges for g in self.graphs)

    def __repr__(self) -> str:
        name = f"{self.name}: " if self.name else ""
        return (f"GraphDataset({name}num_graphs={len(self)}, num_classes={self.num_classes}, "
                f"num_features={self.num_features})")
