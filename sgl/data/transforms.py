"""Structural transforms of :class:`~sgl.data.Graph`: deduplicate, symmetrize, self-loops, subgraphs.

Every transform builds its result through :meth:`GraphTransforms.with_edges` (or the
relabelling branch of :meth:`GraphTransforms.subgraph`), so each result keeps the source's
node data, its metadata (:func:`sgl.data.metadata.copy_metadata`: ``ogb_name``, ``node_year``...)
and both kinds of edge data: ``edge_weight`` and the ``[num_edges, ...]`` features ``edge_attr``
follow their edges through every reordering, and parallel edges merged by
:meth:`~GraphTransforms.deduplicate` have both combined with the same ``reduce``.
"""
from __future__ import annotations

from typing import Any, Optional, Union

import torch

from sgl.data.csr import csr_from_coo
from sgl.data.metadata import copy_metadata
from sgl.data.validation import as_tensor, check_edge_attr, check_edge_weight, check_index_tensor, check_node_ids
from sgl.errors import GraphError

__all__ = ["GraphTransforms", "reduce_rows"]

_REDUCE = ("sum", "mean", "max", "min")


def reduce_rows(values: torch.Tensor, group: torch.Tensor, size: int, reduce: str) -> torch.Tensor:
    """Combine the rows of ``values`` that share a ``group`` id: ``out[g] = reduce(values[group == g])``.

    Example:
        >>> reduce_rows(torch.tensor([[1.0, 2.0], [3.0, 0.0], [5.0, 5.0]]), torch.tensor([0, 0, 1]), 2, "max")
        tensor([[3., 2.],
                [5., 5.]])
    """
    work = values.to(torch.int64) if values.dtype == torch.bool else values
    shape = (size,) + tuple(work.shape[1:])
    if reduce in ("sum", "mean"):
        if reduce == "mean" and not work.is_floating_point():
            work = work.to(torch.float32)
        out = torch.zeros(shape, dtype=work.dtype, device=work.device).index_add_(0, group, work)
        if reduce == "mean":
            counts = torch.bincount(group, minlength=size).to(work.dtype)
            out /= counts.view((-1,) + (1,) * (work.dim() - 1))
        return out
    index = group.view((-1,) + (1,) * (work.dim() - 1)).expand_as(work)
    out = torch.zeros(shape, dtype=work.dtype, device=work.device)
    out = out.scatter_reduce(0, index, work, reduce="amax" if reduce == "max" else "amin", include_self=False)
    return out.to(torch.bool) if values.dtype == torch.bool else out


class GraphTransforms:
    """The structural operations of :class:`~sgl.data.Graph` (mixed into it; see the module docstring)."""

    def with_edges(self, edge_index: Any, edge_weight: Optional[Any] = None, edge_attr: Optional[Any] = None,
                   *, who: str = "with_edges") -> Any:
        """The same nodes (node data and metadata kept) with new edges ``[sources; destinations]``.

        Example:
            >>> import torch
            >>> from sgl.data import Graph
            >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 3))
            >>> g.ogb_name = "ogbn-arxiv"
            >>> h = g.with_edges(torch.tensor([[0], [0]]))
            >>> h.num_edges, h.num_features, h.ogb_name
            (1, 3, 'ogbn-arxiv')
        """
        edge_index = check_index_tensor(edge_index, "edge_index")
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise GraphError(f"edge_index must have shape [2, num_edges], got {tuple(edge_index.shape)}")
        check_node_ids(edge_index, self.num_nodes, "edge_index")
        weight = check_edge_weight(edge_weight, edge_index.size(1))
        attr = check_edge_attr(edge_attr, edge_index.size(1))
        return self._rebuild(edge_index[0], edge_index[1], weight, attr, who=who)

    def _rebuild(self, src: torch.Tensor, dst: torch.Tensor, weight: Optional[torch.Tensor],
                 attr: Optional[torch.Tensor], nodes: Optional[torch.Tensor] = None, who: str = "") -> Any:
        """The one constructor of transform results: CSR over ``(src, dst)``, edge data permuted
        with it, node data (sliced by ``nodes`` when the nodes were renumbered) and metadata."""
        num_nodes = self.num_nodes if nodes is None else int(nodes.numel())
        indptr, indices, order = csr_from_coo(src, dst, num_nodes, need_order=weight is not None or attr is not None)
        data = self._node_data()
        if nodes is not None:
            data = {k: (v[nodes] if isinstance(v, torch.Tensor) else v) for k, v in data.items()}
        out = type(self)(indptr, indices, None if weight is None else weight[order],
                         edge_attr=None if attr is None else attr[order], num_nodes=num_nodes, **data)
        return copy_metadata(self, out, nodes=nodes, who=who or "a Graph transform")

    def deduplicate(self, reduce: str = "sum") -> Any:
        """Merge parallel edges; weights and edge features are combined with ``reduce`` in
        {sum, mean, max, min} (element-wise for features).

        Also sorts every row's neighbours by id.
        """
        if reduce not in _REDUCE:
            raise GraphError(f"reduce must be one of sum, mean, max, min; got {reduce!r}")
        key = self.destinations() * self.num_nodes + self.indices
        unique, inverse = torch.unique(key, sorted=True, return_inverse=True)
        weight = None if self.edge_weight is None else reduce_rows(self.edge_weight, inverse, unique.numel(), reduce)
        attr = None if self.edge_attr is None else reduce_rows(self.edge_attr, inverse, unique.numel(), reduce)
        return self._rebuild(unique % self.num_nodes, unique // self.num_nodes, weight, attr, who="deduplicate")

    def symmetrize(self, reduce: str = "max") -> Any:
        """Make the graph undirected: add every reverse edge, then merge duplicates.

        ``reduce`` combines the weights (and edge features) of an edge and its reverse (default
        ``max``, so an already-symmetric unweighted graph is unchanged, unlike a plain
        concatenation, which would double its weights). A reverse edge carries the features
        of its edge.
        """
        src, dst = self.indices, self.destinations()
        weight = None if self.edge_weight is None else torch.cat([self.edge_weight, self.edge_weight])
        attr = None if self.edge_attr is None else torch.cat([self.edge_attr, self.edge_attr])
        both = self._rebuild(torch.cat([src, dst]), torch.cat([dst, src]), weight, attr, who="symmetrize")
        return both.deduplicate(reduce)

    def remove_self_loops(self) -> Any:
        """Drop every edge ``v -> v``."""
        return self._keep_edges(self.indices != self.destinations(), "remove_self_loops")

    def add_self_loops(self, fill_value: float = 1.0, attr_fill: Optional[Union[float, torch.Tensor]] = None) -> Any:
        """Add one edge ``v -> v`` per node (existing self-loops are kept; remove them first
        for exactly one loop per node).

        A loop has weight ``fill_value``; with edge features, its features are ``attr_fill``
        (a number, or a tensor shaped like one edge's features; default ``fill_value``, as
        PyG's ``add_self_loops``).
        """
        device = self.indices.device
        loops = torch.arange(self.num_nodes, device=device)
        weight = None
        if self.edge_weight is not None or fill_value != 1.0:
            loop_weight = torch.full((self.num_nodes,), float(fill_value), dtype=torch.float32, device=device)
            weight = torch.cat([self.edge_weight_or_ones(), loop_weight])
        attr = None
        if self.edge_attr is not None:
            fill = torch.as_tensor(fill_value if attr_fill is None else attr_fill, dtype=self.edge_attr.dtype,
                                   device=device)
            row_shape = tuple(self.edge_attr.shape[1:])
            try:
                rows = fill.expand((self.num_nodes,) + row_shape)
            except RuntimeError as exc:
                raise GraphError(f"attr_fill has shape {tuple(fill.shape)} but one edge's features have shape "
                                 f"{row_shape}; pass a number or a tensor of that shape") from exc
            attr = torch.cat([self.edge_attr, rows])
        return self._rebuild(torch.cat([self.indices, loops]), torch.cat([self.destinations(), loops]), weight, attr,
                             who="add_self_loops")

    def _keep_edges(self, keep: torch.Tensor, who: str) -> Any:
        weight = None if self.edge_weight is None else self.edge_weight[keep]
        attr = None if self.edge_attr is None else self.edge_attr[keep]
        return self._rebuild(self.indices[keep], self.destinations()[keep], weight, attr, who=who)

    def subgraph(self, nodes: Any, relabel: bool = True) -> Any:
        """Induced subgraph on ``nodes`` (index tensor or boolean mask).

        With ``relabel=True`` (default) nodes are renumbered ``0..len(nodes)-1`` in the given
        order and node data (per-node metadata included) is sliced; the ids in this graph are
        kept in ``graph.node_ids``.
        """
        nodes_t = as_tensor(nodes, "nodes")
        if nodes_t.dtype == torch.bool:
            if nodes_t.numel() != self.num_nodes:
                raise GraphError(f"a boolean node mask needs {self.num_nodes} entries, got {nodes_t.numel()}")
            nodes_t = nodes_t.nonzero().flatten()
        nodes_t = check_index_tensor(nodes_t, "nodes").flatten().to(self.indices.device)
        check_node_ids(nodes_t, self.num_nodes, "nodes")
        if nodes_t.numel() == 0:
            raise GraphError("subgraph needs at least one node")
        if torch.unique(nodes_t).numel() != nodes_t.numel():
            raise GraphError("nodes contains duplicate ids; pass each node once")
        mapping = torch.full((self.num_nodes,), -1, dtype=torch.int64, device=nodes_t.device)
        mapping[nodes_t] = torch.arange(nodes_t.numel(), device=nodes_t.device)
        src, dst = self.indices, self.destinations()
        keep = (mapping[src] >= 0) & (mapping[dst] >= 0)
        if not relabel:
            return self._keep_edges(keep, "subgraph")
        weight = None if self.edge_weight is None else self.edge_weight[keep]
        attr = None if self.edge_attr is None else self.edge_attr[keep]
        g = self._rebuild(mapping[src[keep]], mapping[dst[keep]], weight, attr, nodes=nodes_t, who="subgraph")
        g.node_ids = nodes_t
        return g

    def edge_subgraph(self, edge_mask: Any) -> Any:
        """Keep the edges selected by a boolean mask over :attr:`indices` (all nodes kept)."""
        mask = as_tensor(edge_mask, "edge_mask")
        if mask.dtype != torch.bool or mask.numel() != self.num_edges:
            raise GraphError(f"edge_mask must be a bool tensor with {self.num_edges} entries")
        return self._keep_edges(mask, "edge_subgraph")

