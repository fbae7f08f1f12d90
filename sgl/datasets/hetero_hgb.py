r"""The HGB folder layout (``node.dat``, ``link.dat``, ``label.dat``, ``label.dat.test``) as a HeteroGraph.

HGB is the Heterogeneous Graph Benchmark (Lv et al., KDD 2021; the format of THUDM/HGB's
``data_loader.py``). The rules (type and relation names, reverse link types, splits) are in
:mod:`sgl.datasets.hetero_files`, whose ``file:`` loader calls :func:`read_hgb`.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sgl.datasets.hetero_hgb import read_hgb
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "node.dat").write_text("0\tp0\t0\t1,0\n1\tp1\t0\t0,1\n2\ta0\t1\n")
    >>> _ = (d / "link.dat").write_text("0\t2\t0\t1.0\n1\t2\t0\t1.0\n2\t0\t1\t1.0\n2\t1\t1\t1.0\n")
    >>> _ = (d / "label.dat").write_text("0\tp0\t0\t1\n1\tp1\t0\t0\n")
    >>> g = read_hgb(d, val_ratio=0.0)
    >>> g.num_nodes_dict, g.num_edges_dict, g.y.tolist()
    ({'0': 2, '1': 1}, {('0', 'r0', '1'): 2}, [1, 0])
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

import numpy as np
import torch

from sgl.data import HeteroGraph
from sgl.datasets.splits import random_split
from sgl.errors import ConfigError, DatasetError

__all__ = ["read_hgb"]

PathLike = Union[str, os.PathLike]

_NODE_FIELDS = "node_id, node_name, node_type and optional comma-separated features"
_LABEL_FIELDS = "node_id, node_name, node_type, label"


def _lines(path: Path) -> Iterator[Tuple[int, List[str]]]:
    with open(path, "r", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            text = line.rstrip("\r\n")
            if text.strip():
                yield number, text.split("\t")


def _int(path: Path, number: int, field: str, what: str) -> int:
    try:
        value = int(field)
    except ValueError:
        value = -1
    if value < 0:
        raise DatasetError(f"{path} line {number}: the {what} is {field!r}; it must be a non-negative integer")
    return value


class _Nodes:
    """node.dat: HGB ids, types, features; each type's nodes numbered 0.. in HGB-id order."""

    def __init__(self, path: Path) -> None:
        ids, types, features = [], [], {}
        for number, fields in _lines(path):
            if len(fields) not in (3, 4):
                raise DatasetError(f"{path} line {number}: {len(fields)} tab-separated fields; node.dat has "
                                   f"{_NODE_FIELDS}")
            ids.append(_int(path, number, fields[0], "node id"))
            types.append(_int(path, number, fields[2], "node type"))
            if len(fields) == 4 and fields[3].strip():
                try:
                    features[len(ids) - 1] = np.asarray(fields[3].split(","), dtype=np.float32)
                except ValueError:
                    raise DatasetError(f"{path} line {number}: the features {fields[3][:40]!r} are not "
                                       f"comma-separated numbers") from None
        if not ids:
            raise DatasetError(f"{path}: node.dat lists no nodes; each line has {_NODE_FIELDS}")
        self.path, self.ids, self.types = path, np.asarray(ids, dtype=np.int64), np.asarray(types, dtype=np.int64)
        self.order = np.argsort(self.ids, kind="stable")
        self.sorted = self.ids[self.order]
        twice = np.flatnonzero(self.sorted[1:] == self.sorted[:-1])
        if twice.size:
            raise DatasetError(f"{path}: node {int(self.sorted[twice[0]])} is listed more than once")
        self.type_ids = sorted(set(types))
        self.names = {t: str(t) for t in self.type_ids}
        self.local = np.empty(self.ids.size, dtype=np.int64)  # by position in the sorted ids
        self.counts: Dict[str, int] = {}
        sorted_types = self.types[self.order]
        for t in self.type_ids:
            members = np.flatnonzero(sorted_types == t)
            self.local[members] = np.arange(members.size)
            self.counts[self.names[t]] = int(members.size)
        self.features = self._features(features)

    def _features(self, rows: Dict[int, np.ndarray]) -> Dict[str, torch.Tensor]:
        out = {}
        for t in self.type_ids:
            members = self.order[self.types[self.order] == t]   # file rows of type t, in id order
            have = [row for row in members if row in rows]
            if not have:
                continue
            if len(have) != members.size:
                raise DatasetError(f"{self.path}: {len(have)} of the {members.size} nodes of type {t} have features; "
                                   f"give every node of a type features, or none")
            widths = {rows[row].size for row in have}
            if len(widths) != 1:
                raise DatasetError(f"{self.path}: the nodes of type {t} have features of widths {sorted(widths)}; "
                                   f"a type's nodes need the same number of features")
            out[self.names[t]] = torch.from_numpy(np.stack([rows[row] for row in members]))
        return out

    def find(self, ids: np.ndarray, path: Path, lines: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """``(type, per-type id)`` of HGB ids; an id missing from node.dat names its line."""
        at = np.minimum(np.searchsorted(self.sorted, ids), self.sorted.size - 1)
        bad = np.flatnonzero(self.sorted[at] != ids)
        if bad.size:
            raise DatasetError(f"{path} line {int(lines[bad[0]])}: node {int(ids[bad[0]])} is not in node.dat")
        return self.types[self.order][at], self.local[at]


def _read_links(path: Path) -> Tuple[np.ndarray, np.ndarray]:
    """``[E, 3]`` (src, dst, link type) and ``[E]`` weights; line numbers are row + 1 + skipped blanks."""
    rows, weights, numbers = [], [], []
    for number, fields in _lines(path):
        if len(fields) not in (3, 4):
            raise DatasetError(f"{path} line {number}: {len(fields)} tab-separated fields; link.dat has src, dst, "
                               f"link_type, weight")
        rows.append([_int(path, number, f, what) for f, what in zip(fields[:3], ("source", "target", "link type"))])
        try:
            weights.append(float(fields[3]) if len(fields) == 4 else 1.0)
        except ValueError:
            raise DatasetError(f"{path} line {number}: the weight {fields[3]!r} is not a number") from None
        numbers.append(number)
    if not rows:
        raise DatasetError(f"{path}: link.dat lists no links; each line has src, dst, link_type, weight")
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3), np.asarray(weights), np.asarray(numbers)


def _relations(nodes: _Nodes, path: Path) -> Dict[Tuple[str, str, str], torch.Tensor]:
    links, weights, numbers = _read_links(path)
    src_type, src = nodes.find(links[:, 0], path, numbers)
    dst_type, dst = nodes.find(links[:, 1], path, numbers)
    if not np.all(weights == 1.0):
        warnings.warn(f"{path.name}: link weights are not kept (a HeteroGraph's relations are unweighted)",
                      UserWarning, stacklevel=4)
    kept: Dict[Tuple[str, str, str], torch.Tensor] = {}
    keys: Dict[Tuple[str, str, str], np.ndarray] = {}
    for r in sorted(set(links[:, 2].tolist())):
        rows = np.flatnonzero(links[:, 2] == r)
        pairs = set(zip(src_type[rows].tolist(), dst_type[rows].tolist()))
        if len(pairs) != 1:
            raise DatasetError(f"{path}: link type {r} joins several node-type pairs {sorted(pairs)}; HGB gives each "
                               f"link type one source and one target type")
        s, d = pairs.pop()
        etype = (nodes.names[s], f"r{r}", nodes.names[d])
        n_src = nodes.counts[etype[0]]
        forward = np.sort(dst[rows] * n_src + src[rows])
        reverse = np.sort(src[rows] * nodes.counts[etype[2]] + dst[rows])   # as keys of the reverse relation
        if any(k[0] == etype[2] and k[2] == etype[0] and np.array_equal(v, reverse) for k, v in keys.items()):
            continue  # the reverse of a stored link type: the operators read every relation both ways
        keys[etype] = forward
        kept[etype] = torch.from_numpy(np.stack([src[rows], dst[rows]]))
    return kept


def _labels(nodes: _Nodes, path: Path) -> Tuple[int, np.ndarray, np.ndarray]:
    """``(type, per-type ids, labels)`` of a label file."""
    ids, labels, types, numbers = [], [], [], []
    for number, fields in _lines(path):
        if len(fields) != 4:
            raise DatasetError(f"{path} line {number}: {len(fields)} tab-separated fields; {path.name} has "
                               f"{_LABEL_FIELDS}")
        if "," in fields[3].strip(","):
            raise DatasetError(f"{path} line {number}: node {fields[0]} has several labels ({fields[3]!r}); "
                               f"multi-label sets (HGB's IMDB) are not supported, as these models predict one "
                               f"class per node: keep one label per line")
        ids.append(_int(path, number, fields[0], "node id"))
        types.append(_int(path, number, fields[2], "node type"))
        labels.append(_int(path, number, fields[3].strip(","), "label"))
        numbers.append(number)
    if not ids:
        raise DatasetError(f"{path}: no labels; each line has {_LABEL_FIELDS}")
    node_type, local = nodes.find(np.asarray(ids, dtype=np.int64), path, np.asarray(numbers))
    kinds = sorted(set(node_type.tolist()))
    if len(kinds) != 1:
        raise DatasetError(f"{path}: labels are given for node types {kinds}; label one (target) type only")
    return kinds[0], local, np.asarray(labels, dtype=np.int64)


def read_hgb(folder: PathLike, *, train_ratio: Optional[float] = None, val_ratio: Optional[float] = None,
             seed: int = 0) -> HeteroGraph:
    """A :class:`HeteroGraph` from an HGB folder (rules: :mod:`sgl.datasets.hetero_files`)."""
    folder = Path(folder)
    missing = [name for name in ("node.dat", "link.dat", "label.dat") if not (folder / name).is_file()]
    if missing:
        raise DatasetError(f"{folder}: the HGB layout needs node.dat, link.dat and label.dat (+ label.dat.test); "
                           f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing")
    nodes = _Nodes(folder / "node.dat")
    edges = _relations(nodes, folder / "link.dat")
    target, train_local, train_labels = _labels(nodes, folder / "label.dat")
    name = nodes.names[target]
    y = np.full(nodes.counts[name], -1, dtype=np.int64)
    y[train_local] = train_labels
    test_file = folder / "label.dat.test"
    if test_file.is_file():
        if train_ratio is not None:
            raise ConfigError(f"{folder.name}: label.dat.test fixes the test nodes and the rest of label.dat trains; "
                              f"remove train_ratio (val_ratio sets the validation share of label.dat)")
        test_type, test_local, test_labels = _labels(nodes, test_file)
        if test_type != target:
            raise DatasetError(f"{test_file}: labels type {test_type} but label.dat labels type {target}")
        if np.intersect1d(test_local, train_local).size:
            raise DatasetError(f"{test_file}: some nodes are also in label.dat; test and training nodes must differ")
        y[test_local] = test_labels
        ratio = 0.2 if val_ratio is None else val_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 <= ratio < 1.0:
            raise ConfigError(f"val_ratio must be a fraction in [0, 1), got {val_ratio!r}")
        shuffled = np.random.default_rng(seed).permutation(np.sort(train_local))
        cut = int(shuffled.size * ratio)   # HGB's scripts: the first val_ratio of a shuffle validate
        masks = {"train_mask": shuffled[cut:], "val_mask": shuffled[:cut], "test_mask": test_local}
        masks = {key: torch.from_numpy(np.sort(value)) for key, value in masks.items()}
    else:
        only = np.full_like(y, -1)
        only[train_local] = train_labels
        parts = random_split(torch.from_numpy(only), 0.6 if train_ratio is None else train_ratio,
                             0.2 if val_ratio is None else val_ratio, seed=seed)
        masks = dict(zip(("train_mask", "val_mask", "test_mask"), parts))
    graph = HeteroGraph.from_edge_index(nodes.counts, edges, x_dict=nodes.features, target=name,
                                        y=torch.from_numpy(y), name=folder.name, **masks)
    graph.node_ids = {nodes.names[t]: torch.from_numpy(nodes.sorted[nodes.types[nodes.order] == t])
                      for t in nodes.type_ids}
    return graph
