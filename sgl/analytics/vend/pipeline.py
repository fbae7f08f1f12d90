"""The VEND entry points behind ``sgl vend``: a typed build config, building a store, querying one.

    >>> import os, tempfile
    >>> out = os.path.join(tempfile.mkdtemp(), "karate.db")
    >>> result = build_vend_store(VENDBuildConfig(dataset="karate", out=out, k=2, progress=False))
    >>> result.num_nodes, result.num_edges
    (34, 78)
    >>> answer = query_pairs(out, [[0, 1], [0, 9]])
    >>> answer.is_edge.tolist(), answer.certified.tolist()
    ([True, False], [False, True])
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np

from sgl._checks import check_bool, check_choice, check_int
from sgl.analytics.vend.adjacency import as_edge_array, as_vertex_ids
from sgl.analytics.vend.codes import PairType
from sgl.analytics.vend.front import QueryStats, VENDStore
from sgl.errors import ConfigError

__all__ = ["VENDBuildConfig", "VENDBuildResult", "build_vend_store", "PairAnswers", "query_pairs", "CODE_NAMES"]

#: ``--codes`` names -> code classes a store can hold
CODE_NAMES = {"vend": "VENDCodes", "vend-one-hash": "OneHashVENDCodes", "vertex-bloom": "VertexBloomFilter",
              "range": "RangeFilter"}


@dataclass(frozen=True)
class VENDBuildConfig:
    """What ``sgl vend build`` builds: the graph (a registered dataset or ``edges:PATH``), ``k`` words
    per vertex, the code kind and the store file."""

    dataset: str
    out: str
    root: Optional[str] = None
    k: int = 5
    codes: str = "vend"
    overwrite: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset.strip():
            raise ConfigError(f"dataset must be a dataset name or edges:PATH, got {self.dataset!r}")
        if not isinstance(self.out, (str, os.PathLike)) or not str(self.out):
            raise ConfigError(f"out must be the store file to write, got {self.out!r}")
        check_int(self.k, "k", minimum=1)
        check_choice(self.codes, "codes", tuple(CODE_NAMES))
        check_bool(self.overwrite, "overwrite")
        check_bool(self.progress, "progress")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class VENDBuildResult:
    """A built store: its size, the code kinds, and how long the steps took."""

    path: str
    num_nodes: int
    num_edges: int
    k: int
    codes: str
    kinds: Dict[str, int]
    code_bytes: int
    file_bytes: int
    load_seconds: float
    code_seconds: float
    store_seconds: float


def build_vend_store(config: VENDBuildConfig) -> VENDBuildResult:
    """Read the graph of ``config``, compute its codes and write the SQLite store (atomically)."""
    from sgl.analytics.edgelist import load_edges

    out = Path(config.out)
    if out.exists() and not config.overwrite:
        raise ConfigError(f"{out} already exists; pass overwrite=True (--overwrite) to replace it")
    started = time.perf_counter()
    edges, num_nodes = load_edges(config.dataset, config.root)
    loaded = time.perf_counter()
    with VENDStore.build(out, edges, config.k, num_nodes=num_nodes, kind=CODE_NAMES[config.codes],
                         overwrite=config.overwrite, progress=config.progress) as db:
        return VENDBuildResult(str(out), db.num_nodes, db.num_edges, db.codes.k, config.codes, db.codes.kinds(),
                               db.codes.nbytes, out.stat().st_size, loaded - started, db.build_seconds["codes"],
                               db.build_seconds["store"])


@dataclass(frozen=True)
class PairAnswers:
    """Answers of :func:`query_pairs`: ``is_edge[i]`` for pair ``i``, and whether memory certified it."""

    pairs: np.ndarray
    is_edge: np.ndarray
    certified: np.ndarray
    stats: QueryStats


def query_pairs(path: Any, pairs: Any) -> PairAnswers:
    """Ask the store at ``path`` about ``(m, 2)`` vertex pairs through its VEND codes."""
    pairs = as_edge_array(pairs, "pairs")
    with VENDStore.open(path, verify=False) as db:
        as_vertex_ids(pairs, db.num_nodes, "pairs")
        verdict = db.codes.test_batch(pairs[:, 0], pairs[:, 1])
        answer = db.has_edges(pairs[:, 0], pairs[:, 1])
        return PairAnswers(pairs, answer, verdict == np.uint8(PairType.NonNeighbor), db.stats)
