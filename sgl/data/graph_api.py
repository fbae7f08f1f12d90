"""The PyG-facing surface of :class:`~sgl.data.Graph`: attribute access by name, ``clone``,
``is_undirected``, the feature counts PyG users expect, and device placement.

Names follow ``torch_geometric.data.Data``: :meth:`GraphAPI.keys` lists the attributes a
graph has set in PyG's vocabulary (``edge_index`` for the structure, then ``edge_weight``,
``edge_attr``, ``x``, ``y``, the masks, ``name`` and the metadata), ``graph[key]`` reads one
and ``key in graph`` tests for it. The CSR arrays ``indptr`` and ``indices`` that hold the
structure are readable by name too. Device placement (``to``, ``cpu``, ``cuda``,
``pin_memory``, ``device``) is :class:`sgl.data.placement.DevicePlacement`'s.

Example:
    >>> import torch
    >>> from sgl.data import Graph
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 3), name="pair")
    >>> g.keys()
    ['edge_index', 'x', 'name']
    >>> g["x"].shape, "y" in g, g.num_node_features, g.is_undirected()
    (torch.Size([2, 3]), False, 3, True)
"""
from __future__ import annotations

import copy
from typing import Any, Iterator, List, Tuple

import torch

from sgl.data.metadata import metadata
from sgl.data.placement import DevicePlacement

__all__ = ["GraphAPI"]

#: the Graph fields keys() lists (when set), in PyG's order; the structure comes first as edge_index
_FIELD_KEYS = ("edge_weight", "edge_attr", "x", "y", "train_mask", "val_mask", "test_mask", "name")
#: the CSR storage, readable by name but listed as edge_index
_STORAGE_KEYS = ("indptr", "indices")


class GraphAPI(DevicePlacement):
    """PyG-style access and device placement for :class:`~sgl.data.Graph` (mixed into it)."""

    def keys(self) -> List[str]:
        """The names of the attributes this graph has set (not ``None``), as PyG's ``Data.keys()``.

        ``edge_index`` (the structure; read it with ``graph["edge_index"]``) comes first, then
        the edge data, node data, ``name`` and the metadata in the order it was set. They are
        the keys of :meth:`to_pyg`'s ``Data`` except ``num_nodes``.
        """
        keys = ["edge_index"] + [key for key in _FIELD_KEYS if getattr(self, key) is not None]
        return keys + [key for key, value in metadata(self).items() if value is not None]

    def __getitem__(self, key: str) -> Any:
        """The attribute ``key`` (one of :meth:`keys`, or ``"indptr"`` / ``"indices"``).

        Raises:
            KeyError: the graph has no such attribute set; the message lists the ones it has.
        """
        if key == "edge_index":
            return self.edge_index
        if isinstance(key, str) and (key in _STORAGE_KEYS or key in self.keys()):
            return getattr(self, key)
        raise KeyError(f"this Graph has no attribute {key!r} set; its keys are {self.keys()} (the CSR structure is "
                       f"also readable as 'indptr' and 'indices'); set metadata with graph.{key} = value"
                       if isinstance(key, str) else f"Graph keys are attribute names (str), got {key!r}")

    def __contains__(self, key: Any) -> bool:
        """Whether ``graph[key]`` succeeds."""
        return isinstance(key, str) and (key in _STORAGE_KEYS or key in self.keys())

    def __iter__(self) -> Iterator[Tuple[str, Any]]:
        """``(key, value)`` for every key, as iterating a PyG ``Data`` does."""
        for key in self.keys():
            yield key, self[key]

    def clone(self) -> Any:
        """A deep copy: every tensor (metadata included) is copied and shares no storage with
        this graph; other metadata values are deep-copied as well (as PyG's ``Data.clone``).

        Example:
            >>> import torch
            >>> from sgl.data import Graph
            >>> g = Graph.from_edge_index(torch.tensor([[0], [1]]), x=torch.zeros(2, 1))
            >>> c = g.clone()
            >>> c.x += 1
            >>> g.x.sum().item(), c.x.sum().item()
            (0.0, 2.0)
        """
        return copy.deepcopy(self)

    @property
    def num_node_features(self) -> int:
        """Columns of ``x`` (0 without features): PyG's name for :attr:`num_features`."""
        return self.num_features

    @property
    def num_edge_features(self) -> int:
        """Columns of ``edge_attr`` (1 for a 1-D ``edge_attr``, 0 without), as PyG's."""
        if self.edge_attr is None:
            return 0
        return 1 if self.edge_attr.dim() == 1 else int(self.edge_attr.size(-1))

    def is_undirected(self) -> bool:
        """True when every edge ``u -> v`` has a reverse ``v -> u`` with the same weight and the
        same edge features, as PyG's ``torch_geometric.utils.is_undirected(edge_index,
        [edge_weight, edge_attr])``.

        Parallel edges count one by one (two ``u -> v`` need two ``v -> u``) and pair up in
        storage order. PyG's ``Data.is_undirected()`` is the same test on ``edge_attr`` alone
        (it ignores a separate ``edge_weight``; PyG datasets usually keep weights in
        ``edge_attr``). :meth:`is_symmetric` instead compares the weighted adjacency matrix, where
        parallel edges add up. Runs on the graph's device.

        Example:
            >>> import torch
            >>> from sgl.data import Graph
            >>> ei = torch.tensor([[0, 1], [1, 0]])
            >>> Graph.from_edge_index(ei, edge_weight=torch.tensor([2.0, 2.0])).is_undirected()
            True
            >>> Graph.from_edge_index(ei, edge_weight=torch.tensor([2.0, 3.0])).is_undirected()
            False
        """
        src, dst = self.indices, self.destinations()
        forward = torch.argsort(src * self.num_nodes + dst, stable=True)
        backward = torch.argsort(dst * self.num_nodes + src, stable=True)
        if not (torch.equal(src[forward], dst[backward]) and torch.equal(dst[forward], src[backward])):
            return False
        return all(torch.equal(values[forward], values[backward])
                   for values in (self.edge_weight, self.edge_attr) if values is not None)
