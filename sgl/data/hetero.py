r"""Heterogeneous graphs: typed nodes, typed relations, one labelled target type.

A :class:`HeteroGraph` holds, for every node type, a node count and optional features, and
for every relation ``(src_type, relation, dst_type)`` a CSR adjacency grouped by
*destination* (the convention of :class:`~sgl.data.Graph`: row ``v`` of relation ``r``
lists the ``src_type`` sources of the edges ``u -r-> v``). Labels and split masks live on
one *target* type.

The node-classification view of a heterogeneous graph is its target type's: ``num_nodes``,
``y``, the masks, ``num_classes`` and ``num_features`` describe the target nodes, so
:class:`sgl.tasks.Trainer` and :func:`sgl.tasks.run_node_classification` accept a
``HeteroGraph`` exactly as they accept a ``Graph`` (the heterogeneous models' ``precompute``
sees the whole graph). Counts per type are in :attr:`HeteroGraph.num_nodes_dict`.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import torch

from sgl.data.csr import csr_from_coo
from sgl.data.metadata import is_plain
from sgl.data.placement import DevicePlacement
from sgl.data.validation import check_features, check_index_tensor, check_labels, check_mask, check_node_ids
from sgl.errors import FeatureError, GraphError
from sgl.fileio import atomic_write

__all__ = ["HeteroGraph", "EdgeType"]

EdgeType = Tuple[str, str, str]
_MASKS = ("train_mask", "val_mask", "test_mask")
_FORMAT = "sgl-hetero-1"


def _edge_type(key: Any) -> EdgeType:
    if not (isinstance(key, tuple) and len(key) == 3 and all(isinstance(p, str) and p for p in key)):
        raise GraphError(f"a relation is a (src_type, relation, dst_type) tuple of non-empty strings, got {key!r}")
    return key  # type: ignore[return-value]


def _check_counts(num_nodes_dict: Any) -> Dict[str, int]:
    if not isinstance(num_nodes_dict, Mapping) or not num_nodes_dict:
        raise GraphError("num_nodes_dict must map each node type to its node count (at least one type)")
    counts: Dict[str, int] = {}
    for ntype, count in num_nodes_dict.items():
        if not isinstance(ntype, str) or not ntype:
            raise GraphError(f"node types are non-empty strings, got {ntype!r}")
        if isinstance(count, bool) or int(count) != count or int(count) < 1:
            raise GraphError(f"node type {ntype!r} has count {count!r}; every type needs >= 1 node")
        counts[ntype] = int(count)
    return counts


class HeteroGraph(DevicePlacement):
    r"""A heterogeneous graph: per-type node counts and features, per-relation CSR adjacency.

    For relation :math:`r = (s, \rho, d)` the adjacency :math:`A_r \in \{0,1\}^{n_d \times n_s}`
    is stored as CSR over destinations, so :math:`A_r X_s` sums the features of each
    destination's ``s``-neighbours along ``r``.

    Args:
        num_nodes_dict: node count per type (every type must be listed, counts >= 1).
        relations: ``{(src, rel, dst): (indptr, indices)}``, ``indptr`` of length
            ``num_nodes_dict[dst] + 1``, ``indices`` source ids in ``[0, num_nodes_dict[src])``.
        x_dict: ``{type: [n_type, d_type]}`` features; types may be missing (featureless).
        target: the labelled node type (needed when ``y`` or masks are given).
        y, train_mask, val_mask, test_mask: labels (``-1`` = unlabelled) and masks of ``target``.
        name: the dataset's name.

    Other attributes set on a graph (``graph.ogb_name``, ``graph.node_ids``) are kept by
    :meth:`save`/:meth:`load` when they are plain values: strings, numbers, tensors, and
    lists or string-keyed dicts of them.

    ``to(device)``, ``cpu()``, ``cuda()``, ``pin_memory()`` and ``device`` work as on
    :class:`~sgl.data.Graph` (:mod:`sgl.data.placement`): they return a new graph with every
    relation, feature, label and mask moved.

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index(
        ...     {"paper": 3, "author": 2},
        ...     {("author", "writes", "paper"): torch.tensor([[0, 0, 1], [0, 1, 2]])},
        ...     x_dict={"paper": torch.eye(3)}, target="paper", y=torch.tensor([0, 1, 0]))
        >>> g
        HeteroGraph(paper=3, author=2; author-writes->paper=3; target=paper)
        >>> g.num_nodes, g.num_classes, g.featureless_types()
        (3, 2, ['author'])
    """

    def __init__(self, num_nodes_dict: Mapping[str, int], relations: Mapping[Any, Tuple[Any, Any]], *,
                 x_dict: Optional[Mapping[str, Any]] = None, target: Optional[str] = None, y: Optional[Any] = None,
                 train_mask: Optional[Any] = None, val_mask: Optional[Any] = None,
                 test_mask: Optional[Any] = None, name: Optional[str] = None) -> None:
        counts = _check_counts(num_nodes_dict)
        self.num_nodes_dict: Dict[str, int] = counts
        self._csr: Dict[EdgeType, Tuple[torch.Tensor, torch.Tensor]] = {}
        for key, pair in relations.items():
            etype = _edge_type(key)
            self._check_types(etype)
            indptr, indices = (check_index_tensor(t, f"{etype} {part}") for t, part in zip(pair, ("indptr", "indices")))
            n_dst = counts[etype[2]]
            if indptr.dim() != 1 or indptr.numel() != n_dst + 1:
                raise GraphError(f"relation {etype}: indptr has {indptr.numel()} entries, expected "
                                 f"num_nodes_dict[{etype[2]!r}] + 1 = {n_dst + 1} (CSR over destinations)")
            if int(indptr[0]) != 0 or int(indptr[-1]) != indices.numel() or bool((indptr[1:] < indptr[:-1]).any()):
                raise GraphError(f"relation {etype}: indptr must start at 0, be non-decreasing and end at "
                                 f"len(indices)={indices.numel()}")
            try:
                check_node_ids(indices, counts[etype[0]], f"relation {etype} source")
            except GraphError as exc:
                raise GraphError(f"{exc} (ids are per type: {etype[0]!r} has {counts[etype[0]]} nodes)") from None
            self._csr[etype] = (indptr, indices)
        self.x_dict: Dict[str, torch.Tensor] = {}
        for ntype, x in (x_dict or {}).items():
            if ntype not in counts:
                raise GraphError(f"features given for unknown node type {ntype!r}; node types: {sorted(counts)}")
            if x is not None:
                self.x_dict[ntype] = check_features(x, counts[ntype], f"x_dict[{ntype!r}]")
        if target is not None and target not in counts:
            raise GraphError(f"target type {target!r} is not a node type; node types: {sorted(counts)}")
        given = {"y": y, "train_mask": train_mask, "val_mask": val_mask, "test_mask": test_mask}
        if target is None and any(v is not None for v in given.values()):
            raise GraphError("labels/masks were given without target=...; name the node type they belong to")
        self.target: Optional[str] = target
        n = counts[target] if target is not None else 0
        self.y: Optional[torch.Tensor] = None if y is None else check_labels(y, n, f"y (of {target!r})")
        for mask in _MASKS:
            value = given[mask]
            setattr(self, mask, None if value is None else check_mask(value, n, f"{mask} (of {target!r})"))
        self.name = name

    def _check_types(self, etype: EdgeType) -> None:
        for side, ntype in (("source", etype[0]), ("destination", etype[2])):
            if ntype not in self.num_nodes_dict:
                raise GraphError(f"relation {etype} names the unknown {side} type {ntype!r}; node types: "
                                 f"{sorted(self.num_nodes_dict)} (add it to num_nodes_dict)")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_edge_index(cls, num_nodes_dict: Mapping[str, int], edge_index_dict: Mapping[Any, Any],
                        **node_data: Any) -> "HeteroGraph":
        """Build from ``{(src, rel, dst): [2, E] edge_index}`` (``[sources; destinations]``, per-type ids)."""
        num_nodes_dict = _check_counts(num_nodes_dict)
        relations = {}
        for key, edge_index in edge_index_dict.items():
            etype = _edge_type(key)
            edge_index = check_index_tensor(edge_index, f"edge_index of {etype}")
            if edge_index.dim() != 2 or edge_index.size(0) != 2:
                raise GraphError(f"edge_index of {etype} must be [2, num_edges], got {tuple(edge_index.shape)}")
            for side, ntype, row in (("source", etype[0], 0), ("destination", etype[2], 1)):
                if ntype not in num_nodes_dict:
                    raise GraphError(f"relation {etype} names the unknown {side} type {ntype!r}; node types: "
                                     f"{sorted(num_nodes_dict)}")
                try:
                    check_node_ids(edge_index[row], int(num_nodes_dict[ntype]), f"relation {etype} {side}")
                except GraphError as exc:
                    raise GraphError(f"{exc} (ids are per type: {ntype!r} has {num_nodes_dict[ntype]} nodes)") \
                        from None
            indptr, indices, _ = csr_from_coo(edge_index[0], edge_index[1], int(num_nodes_dict[etype[2]]),
                                              need_order=False)
            relations[etype] = (indptr, indices)
        return cls(num_nodes_dict, relations, **node_data)

    @classmethod
    def from_pyg(cls, data: Any, target: Optional[str] = None) -> "HeteroGraph":
        """Build from a ``torch_geometric.data.HeteroData`` (``x``, ``y`` and masks of ``target``;
        ``target`` defaults to the one node type with ``y``)."""
        from sgl.data.hetero_convert import hetero_from_pyg

        return hetero_from_pyg(cls, data, target)

    @classmethod
    def from_dgl(cls, graph: Any, target: Optional[str] = None) -> "HeteroGraph":
        """Build from a DGL heterograph (ndata ``feat``/``label``/masks); needs ``dgl``."""
        from sgl.data.hetero_convert import hetero_from_dgl

        return hetero_from_dgl(cls, graph, target)

    # ------------------------------------------------------------------ exporters
    def to_pyg(self) -> Any:
        """Export to ``torch_geometric.data.HeteroData`` (every type, relation, feature, label, mask)."""
        from sgl.data.hetero_convert import hetero_to_pyg

        return hetero_to_pyg(self)

    def to_dgl(self) -> Any:
        """Export to a DGL heterograph (needs ``dgl``)."""
        from sgl.data.hetero_convert import hetero_to_dgl

        return hetero_to_dgl(self)

    def to_homogeneous(self, relations: Optional[Iterable[EdgeType]] = None, symmetric: bool = False) -> Any:
        """One :class:`~sgl.data.Graph` over all node types with the type maps
        (:class:`~sgl.data.hetero_convert.HomogeneousView`); see :func:`~sgl.data.hetero_convert.to_homogeneous`."""
        from sgl.data.hetero_convert import to_homogeneous

        return to_homogeneous(self, relations, symmetric)

    # ------------------------------------------------------------------ structure
    @property
    def node_types(self) -> List[str]:
        return list(self.num_nodes_dict)

    @property
    def edge_types(self) -> List[EdgeType]:
        return list(self._csr)

    def check_relation(self, etype: Any) -> EdgeType:
        """``etype`` if it is a relation of this graph, else a ``GraphError`` naming the relations."""
        if not isinstance(etype, tuple) or etype not in self._csr:
            raise GraphError(f"unknown relation {etype!r}; relations: {self.edge_types}")
        return etype

    def check_node_type(self, ntype: Any) -> str:
        if ntype not in self.num_nodes_dict:
            raise GraphError(f"unknown node type {ntype!r}; node types: {self.node_types}")
        return ntype

    def csr(self, etype: EdgeType) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(indptr, indices)`` of relation ``etype`` (rows: destinations)."""
        return self._csr[self.check_relation(etype)]

    def edge_index(self, etype: EdgeType) -> torch.Tensor:
        """``[2, E]`` ``[sources; destinations]`` of relation ``etype``."""
        indptr, indices = self.csr(etype)
        counts = indptr[1:] - indptr[:-1]
        dst = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts)
        return torch.stack([indices, dst])

    @property
    def num_edges_dict(self) -> Dict[EdgeType, int]:
        return {etype: int(indices.numel()) for etype, (_, indices) in self._csr.items()}

    @property
    def num_edges(self) -> int:
        """Edges over all relations."""
        return sum(self.num_edges_dict.values())

    @property
    def total_nodes(self) -> int:
        return sum(self.num_nodes_dict.values())

    def featureless_types(self) -> List[str]:
        return [t for t in self.num_nodes_dict if t not in self.x_dict]

    def add_reverse_relations(self, prefix: str = "rev_") -> "HeteroGraph":
        """A copy with the reverse ``(dst, prefix + rel, src)`` of every relation that has none
        (a relation from a type to itself is reversed too), as PyG's ``ToUndirected`` does."""
        relations = dict(self._csr)
        for (src, rel, dst) in list(self._csr):
            if any(s == dst and d == src and (s, r, d) != (src, rel, dst) for (s, r, d) in self._csr):
                continue
            ei = self.edge_index((src, rel, dst))
            indptr, indices, _ = csr_from_coo(ei[1], ei[0], self.num_nodes_dict[src], need_order=False)
            relations[(dst, prefix + rel, src)] = (indptr, indices)
        return self._with(relations=relations)

    def _with(self, **changes: Any) -> "HeteroGraph":
        args = dict(relations=self._csr, x_dict=self.x_dict, target=self.target, y=self.y, name=self.name,
                    **{m: getattr(self, m) for m in _MASKS})
        args.update(changes)
        relations = args.pop("relations")
        out = type(self)(self.num_nodes_dict, relations, **args)
        for key, value in self._metadata().items():
            setattr(out, key, value)
        return out

    def with_features(self, x_dict: Mapping[str, torch.Tensor]) -> "HeteroGraph":
        """A copy whose features are ``x_dict`` (e.g. after filling featureless types)."""
        return self._with(x_dict=x_dict)

    # ------------------------------------------------------------------ node-classification view (target type)
    def require_target(self) -> str:
        if self.target is None:
            raise FeatureError("this heterogeneous graph has no target type; pass target=... with labels and masks")
        return self.target

    def require_labels(self) -> torch.Tensor:
        """The target's labels, or a ``FeatureError`` saying the target type has none."""
        target = self.require_target()
        if self.y is None:
            raise FeatureError(f"the target type {target!r} has no labels (y); node classification needs them")
        return self.y

    @property
    def num_nodes(self) -> int:
        """Nodes of the **target** type (the classification view); all types: :attr:`total_nodes`."""
        return self.num_nodes_dict[self.target] if self.target is not None else self.total_nodes

    @property
    def x(self) -> Optional[torch.Tensor]:
        """The target type's features (``None`` if it has none)."""
        return self.x_dict.get(self.target) if self.target is not None else None

    @property
    def num_features(self) -> int:
        x = self.x
        return 0 if x is None else int(x.size(1))

    @property
    def num_classes(self) -> int:
        if self.y is None or self.y.numel() == 0 or self.y.is_floating_point():
            return 0
        return int(self.y.max()) + 1

    def split_sizes(self) -> Tuple[int, int, int]:
        return tuple(0 if getattr(self, m) is None else int(getattr(self, m).sum()) for m in _MASKS)

    # ------------------------------------------------------------------ identity, persistence
    def _metadata(self) -> Dict[str, Any]:
        skip = {"num_nodes_dict", "_csr", "x_dict", "target", "y", "name", *_MASKS}
        return {k: v for k, v in vars(self).items() if k not in skip and not k.startswith("_") and is_plain(v)}

    def content_hash(self) -> str:
        """A stable hex digest of types, relations, features, labels and masks (cache keys, run records)."""
        digest = hashlib.blake2b(digest_size=16)

        def feed(label: str, tensor: Optional[torch.Tensor]) -> None:
            digest.update(label.encode())
            if tensor is None:
                digest.update(b"none")
            else:
                digest.update(f"{tensor.dtype}{tuple(tensor.shape)}".encode())
                digest.update(tensor.contiguous().cpu().numpy().tobytes())

        digest.update(repr(sorted(self.num_nodes_dict.items())).encode())
        for etype in sorted(self._csr):
            feed(f"{etype}.indptr", self._csr[etype][0])
            feed(f"{etype}.indices", self._csr[etype][1])
        for ntype in sorted(self.x_dict):
            feed(f"x:{ntype}", self.x_dict[ntype])
        digest.update(repr(self.target).encode())
        for key in ("y",) + _MASKS:
            feed(key, getattr(self, key))
        return digest.hexdigest()

    def state_dict(self) -> Dict[str, Any]:
        return {"format": _FORMAT, "num_nodes_dict": dict(self.num_nodes_dict),
                "relations": [[list(etype), indptr, indices] for etype, (indptr, indices) in self._csr.items()],
                "x_dict": dict(self.x_dict), "target": self.target, "name": self.name,
                **{k: getattr(self, k) for k in ("y",) + _MASKS}, "metadata": self._metadata()}

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write atomically (temporary file + rename); :meth:`load` reads it back."""
        with atomic_write(path, "wb") as handle:
            torch.save(self.state_dict(), handle)

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "HeteroGraph":
        """Read a file written by :meth:`save`; a missing, corrupt or foreign file raises ``GraphError``."""
        if not os.path.exists(path):
            raise GraphError(f"no heterogeneous graph file at {path!r}; write one with HeteroGraph.save(path)")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # truncated or corrupt archives raise many types
            raise GraphError(f"{path!r} is not a readable SGL heterogeneous graph file: {exc}") from exc
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            raise GraphError(f"{path!r} was not written by HeteroGraph.save")
        relations = {tuple(etype): (indptr, indices) for etype, indptr, indices in state["relations"]}
        graph = cls(state["num_nodes_dict"], relations, x_dict=state["x_dict"], target=state["target"],
                    name=state["name"], **{k: state[k] for k in ("y",) + _MASKS})
        for key, value in (state.get("metadata") or {}).items():
            setattr(graph, key, value)
        return graph

    def __repr__(self) -> str:
        nodes = ", ".join(f"{t}={n}" for t, n in self.num_nodes_dict.items())
        rels = ", ".join(f"{s}-{r}->{d}={n}" for (s, r, d), n in self.num_edges_dict.items())
        target = f"; target={self.target}" if self.target else ""
        name = f"{self.name}: " if self.name else ""
        return f"HeteroGraph({name}{nodes}; {rels}{target})"
