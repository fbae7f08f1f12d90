"""Conversions of :class:`~sgl.data.HeteroGraph`: torch_geometric ``HeteroData``, DGL
heterographs, and one homogeneous :class:`~sgl.data.Graph` with the type maps."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional

import torch

from sgl.data.graph import Graph
from sgl.errors import GraphError

__all__ = ["HomogeneousView", "to_homogeneous", "hetero_to_pyg", "hetero_from_pyg", "hetero_to_dgl",
           "hetero_from_dgl"]

_MASKS = ("train_mask", "val_mask", "test_mask")


@dataclass
class HomogeneousView:
    """A heterogeneous graph flattened: global node ``offsets[t] + i`` is node ``i`` of type ``t``.

    ``node_type[v]`` / ``local_id[v]`` map a global id back; ``edge_type[e]`` is the index in
    ``edge_types`` of CSR edge ``e`` of ``graph`` (reverse edges, with ``symmetric=True``,
    carry the index of their relation).
    """

    graph: Graph
    node_types: List[str]
    edge_types: List[Any]
    offsets: Dict[str, int]
    node_type: torch.Tensor
    local_id: torch.Tensor
    edge_type: torch.Tensor

    def global_ids(self, ntype: str, local: Optional[torch.Tensor] = None) -> torch.Tensor:
        n = int((self.node_type == self.node_types.index(ntype)).sum())
        local = torch.arange(n) if local is None else local
        return local + self.offsets[ntype]


def to_homogeneous(hetero: Any, relations: Optional[Iterable[Any]] = None, symmetric: bool = False) -> HomogeneousView:
    """Flatten ``hetero`` (all node types, in ``hetero.node_types`` order) into one graph.

    ``relations`` restricts the edges to a subset (all by default); ``symmetric=True`` adds the
    reverse of every edge (no deduplication). Features are concatenated when every type has
    features of one width (else ``graph.x`` is ``None``); labels are the target's, ``-1``
    elsewhere, and the masks cover target nodes only.

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"a": 2, "b": 1}, {("a", "to", "b"): torch.tensor([[0, 1], [0, 0]])})
        >>> view = g.to_homogeneous(symmetric=True)
        >>> view.graph.num_nodes, view.graph.num_edges, view.offsets
        (3, 4, {'a': 0, 'b': 2})
    """
    types = hetero.node_types
    offsets, start = {}, 0
    for t in types:
        offsets[t] = start
        start += hetero.num_nodes_dict[t]
    chosen = hetero.edge_types if relations is None else [hetero.check_relation(tuple(r)) for r in relations]
    srcs, dsts, kinds = [], [], []
    for i, etype in enumerate(chosen):
        ei = hetero.edge_index(etype)
        src, dst = ei[0] + offsets[etype[0]], ei[1] + offsets[etype[2]]
        srcs.append(src), dsts.append(dst), kinds.append(torch.full((src.numel(),), i, dtype=torch.int64))
        if symmetric:
            srcs.append(dst), dsts.append(src), kinds.append(torch.full((src.numel(),), i, dtype=torch.int64))
    empty = torch.zeros(0, dtype=torch.int64)
    src = torch.cat(srcs) if srcs else empty
    dst = torch.cat(dsts) if dsts else empty
    kind = torch.cat(kinds) if kinds else empty
    node_type = torch.cat([torch.full((hetero.num_nodes_dict[t],), i, dtype=torch.int64) for i, t in enumerate(types)])
    local_id = torch.cat([torch.arange(hetero.num_nodes_dict[t]) for t in types])
    data: Dict[str, Any] = {}
    widths = {int(x.size(1)) for x in hetero.x_dict.values()}
    if len(hetero.x_dict) == len(types) and len(widths) == 1:
        data["x"] = torch.cat([hetero.x_dict[t].float() for t in types])
    if hetero.target is not None:
        lo, n = offsets[hetero.target], hetero.num_nodes_dict[hetero.target]
        if hetero.y is not None and hetero.y.dim() == 1 and not hetero.y.is_floating_point():
            y = torch.full((start,), -1, dtype=torch.int64)
            y[lo:lo + n] = hetero.y
            data["y"] = y
        for mask in _MASKS:
            value = getattr(hetero, mask)
            if value is not None:
                full = torch.zeros(start, dtype=torch.bool)
                full[lo:lo + n] = value
                data[mask] = full
    graph = Graph.from_edge_index(torch.stack([src, dst]), num_nodes=start, edge_attr=kind.view(-1, 1).float(),
                                  **data)
    edge_type = graph.edge_attr.view(-1).long()
    graph.edge_attr = None
    return HomogeneousView(graph, types, list(chosen), offsets, node_type, local_id, edge_type)


# ---------------------------------------------------------------------------- torch_geometric
def hetero_to_pyg(hetero: Any) -> Any:
    from torch_geometric.data import HeteroData

    data = HeteroData()
    for t, n in hetero.num_nodes_dict.items():
        data[t].num_nodes = n
        if t in hetero.x_dict:
            data[t].x = hetero.x_dict[t]
    for etype in hetero.edge_types:
        data[etype].edge_index = hetero.edge_index(etype)
    if hetero.target is not None:
        store = data[hetero.target]
        if hetero.y is not None:
            store.y = hetero.y
        for mask in _MASKS:
            if getattr(hetero, mask) is not None:
                store[mask] = getattr(hetero, mask)
    return data


def hetero_from_pyg(cls: type, data: Any, target: Optional[str] = None) -> Any:
    node_types = list(data.node_types)
    if not node_types:
        raise GraphError("the HeteroData has no node types")
    if target is None:
        labelled = [t for t in node_types if "y" in data[t]]
        if len(labelled) > 1:
            raise GraphError(f"several node types have labels ({labelled}); pass target=...")
        target = labelled[0] if labelled else None
    elif target not in node_types:
        raise GraphError(f"target type {target!r} is not in the HeteroData; node types: {node_types}")
    counts = {t: int(data[t].num_nodes) for t in node_types}
    x_dict = {t: data[t].x for t in node_types if "x" in data[t]}
    edges = {tuple(e): data[e].edge_index for e in data.edge_types}
    node_data: Dict[str, Any] = {}
    if target is not None:
        store = data[target]
        node_data = {k: store[k] for k in ("y",) + _MASKS if k in store}
    return cls.from_edge_index(counts, edges, x_dict=x_dict, target=target, **node_data)


# ---------------------------------------------------------------------------- DGL (optional)
def _dgl() -> Any:
    try:
        import dgl
    except Exception as exc:  # not installed, or a broken install (dgl imports torchdata.datapipes)
        raise GraphError("DGL heterograph conversion needs the optional `dgl` package (pip install dgl)") from exc
    return dgl


def hetero_to_dgl(hetero: Any) -> Any:
    dgl = _dgl()
    edges = {etype: tuple(hetero.edge_index(etype)) for etype in hetero.edge_types}
    graph = dgl.heterograph(edges, num_nodes_dict=dict(hetero.num_nodes_dict))
    for t, x in hetero.x_dict.items():
        graph.nodes[t].data["feat"] = x
    if hetero.target is not None:
        if hetero.y is not None:
            graph.nodes[hetero.target].data["label"] = hetero.y
        for mask in _MASKS:
            if getattr(hetero, mask) is not None:
                graph.nodes[hetero.target].data[mask] = getattr(hetero, mask)
    return graph


def hetero_from_dgl(cls: type, graph: Any, target: Optional[str] = None) -> Any:
    counts = {t: int(graph.num_nodes(t)) for t in graph.ntypes}
    edges = {tuple(e): torch.stack(graph.edges(etype=e)) for e in graph.canonical_etypes}
    x_dict = {t: graph.nodes[t].data["feat"] for t in graph.ntypes if "feat" in graph.nodes[t].data}
    if target is None:
        labelled = [t for t in graph.ntypes if "label" in graph.nodes[t].data]
        target = labelled[0] if len(labelled) == 1 else None
    node_data: Dict[str, Any] = {}
    if target is not None:
        nd = graph.nodes[target].data
        node_data = {k: nd[k] for k in _MASKS if k in nd}
        if "label" in nd:
            node_data["y"] = nd["label"]
    return cls.from_edge_index(counts, edges, x_dict=x_dict, target=target, **node_data)
