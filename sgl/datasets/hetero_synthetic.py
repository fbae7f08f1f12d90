r"""A seeded synthetic heterogeneous graph shaped like ogbn-mag, and a writer of OGB's
heterogeneous on-disk layout (for tests, benchmarks and exporting).

:func:`synthetic_mag` plants classes on papers: paper features are a class centroid plus
Gaussian noise (``signal`` scales the centroids), citations and shared authors/fields are
biased towards papers of the same class with probability ``homophily``. Relation sizes
follow ogbn-mag's (5,416,271 citations, 7,145,660 authorships, 7,505,078 paper-field and
1,043,998 author-institution edges for 736,389 papers and 1,134,649 authors), so
``scale=1.0`` is ogbn-mag's size: 1,939,743 nodes (with 8,740 institutions and 59,965
fields) and 21.1M edges.
"""
from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any, Dict, Union

import numpy as np
import torch

from sgl._checks import check_int, check_probability, check_real
from sgl.data import HeteroGraph
from sgl.fileio import atomic_dir

__all__ = ["synthetic_mag", "write_ogb_hetero_layout"]

_MAG = {"paper": 736389, "author": 1134649, "institution": 8740, "field_of_study": 59965}


def _biased_targets(rng: np.random.Generator, src_class: np.ndarray, n_dst: int, dst_class: np.ndarray,
                    homophily: float, num_classes: int) -> np.ndarray:
    """For each edge, a destination of the source's class with probability ``homophily``."""
    by_class = [np.flatnonzero(dst_class == c) for c in range(num_classes)]
    out = rng.integers(0, n_dst, size=src_class.size)
    same = rng.random(src_class.size) < homophily
    for c in range(num_classes):
        pick = same & (src_class == c)
        if by_class[c].size and pick.any():
            out[pick] = by_class[c][rng.integers(0, by_class[c].size, size=int(pick.sum()))]
    return out


def synthetic_mag(scale: float = 0.001, num_classes: int = 8, num_features: int = 32, homophily: float = 0.7,
                  signal: float = 1.0, seed: int = 0) -> HeteroGraph:
    """An ogbn-mag-shaped :class:`~sgl.data.HeteroGraph` (only papers have features and labels;
    random 60/20/20 paper split).

    Example:
        >>> g = synthetic_mag(scale=0.0005, seed=1)
        >>> sorted(g.num_nodes_dict), g.featureless_types()
        (['author', 'field_of_study', 'institution', 'paper'], ['author', 'institution', 'field_of_study'])
    """
    check_real(scale, "scale", 1e-7, 10.0)
    check_int(num_classes, "num_classes", 2)
    check_int(num_features, "num_features", 1)
    check_probability(homophily, "homophily")
    rng = np.random.default_rng(seed)
    counts = {t: max(num_classes, int(round(n * scale))) for t, n in _MAG.items()}
    n_paper = counts["paper"]
    y = rng.integers(0, num_classes, size=n_paper)
    # authors and fields get a latent class so that co-authorship and topics carry signal
    cls = {t: rng.integers(0, num_classes, size=counts[t]) for t in ("author", "field_of_study", "institution")}
    centroids = rng.normal(size=(num_classes, num_features)) * signal
    x = (centroids[y] + rng.normal(size=(n_paper, num_features))).astype(np.float32)
    edges: Dict[Any, torch.Tensor] = {}

    def relation(src_type: str, dst_type: str, count: int, src_class: np.ndarray, n_src: int) -> torch.Tensor:
        src = rng.integers(0, n_src, size=count)
        dst = _biased_targets(rng, src_class[src], counts[dst_type], y if dst_type == "paper" else cls[dst_type],
                              homophily, num_classes)
        return torch.from_numpy(np.stack([src, dst]).astype(np.int64))

    per_paper = {"cites": 5416271 / 736389, "writes": 7145660 / 736389, "has_topic": 7505078 / 736389}
    edges[("paper", "cites", "paper")] = relation("paper", "paper", int(n_paper * per_paper["cites"]), y, n_paper)
    edges[("author", "writes", "paper")] = relation("author", "paper", int(n_paper * per_paper["writes"]),
                                                    cls["author"], counts["author"])
    edges[("paper", "has_topic", "field_of_study")] = relation(
        "paper", "field_of_study", int(n_paper * per_paper["has_topic"]), y, n_paper)
    edges[("author", "affiliated_with", "institution")] = relation(
        "author", "institution", int(counts["author"] * 1043998 / 1134649), cls["author"], counts["author"])
    order = rng.permutation(n_paper)
    a, b = int(0.6 * n_paper), int(0.8 * n_paper)
    return HeteroGraph.from_edge_index(counts, edges, x_dict={"paper": torch.from_numpy(x)}, target="paper",
                                       y=torch.from_numpy(y), train_mask=torch.from_numpy(order[:a]),
                                       val_mask=torch.from_numpy(order[a:b]), test_mask=torch.from_numpy(order[b:]),
                                       name="synthetic-mag")


def _write_gz(path: Path, lines: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        handle.write(lines)


def _rows(array: np.ndarray) -> str:
    if array.ndim == 1:
        array = array[:, None]
    return "".join(",".join(map(str, row)) + "\n" for row in array.tolist())


def write_ogb_hetero_layout(graph: HeteroGraph, folder: Union[str, os.PathLike], split: str = "time") -> Path:
    """Write ``graph`` in OGB's heterogeneous raw layout (``raw/``, ``split/<split>/<target>/``),
    atomically; :func:`sgl.datasets.read_ogbn_mag` reads it back. Small graphs only (CSV text)."""
    target = graph.require_target()
    y = graph.require_labels()
    with atomic_dir(folder) as tmp:
        raw = Path(tmp) / "raw"
        types = graph.node_types
        _write_gz(raw / "num-node-dict.csv.gz", ",".join(types) + "\n" + ",".join(
            str(graph.num_nodes_dict[t]) for t in types) + "\n")
        _write_gz(raw / "triplet-type-list.csv.gz", "".join(",".join(e) + "\n" for e in graph.edge_types))
        for etype in graph.edge_types:
            sub = raw / "relations" / "___".join(etype)
            ei = graph.edge_index(etype).numpy().T
            _write_gz(sub / "edge.csv.gz", _rows(ei))
            _write_gz(sub / "num-edge-list.csv.gz", f"{ei.shape[0]}\n")
            _write_gz(sub / "edge_reltype.csv.gz", _rows(np.full(ei.shape[0], graph.edge_types.index(etype))))
        for t, x in graph.x_dict.items():
            _write_gz(raw / "node-feat" / t / "node-feat.csv.gz", _rows(x.numpy()))
        _write_gz(raw / "nodetype-has-label.csv.gz", ",".join(types) + "\n" + ",".join(
            "True" if t == target else "False" for t in types) + "\n")
        _write_gz(raw / "node-label" / target / "node-label.csv.gz", _rows(y.numpy()))
        split_dir = Path(tmp) / "split" / split
        _write_gz(split_dir / "nodetype-has-split.csv.gz", ",".join(types) + "\n" + ",".join(
            "True" if t == target else "False" for t in types) + "\n")
        for part, mask in (("train", graph.train_mask), ("valid", graph.val_mask), ("test", graph.test_mask)):
            _write_gz(split_dir / target / f"{part}.csv.gz", _rows(mask.nonzero().flatten().numpy()))
    return Path(folder)
