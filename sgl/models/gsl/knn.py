"""Structure-learning baselines: a cosine kNN graph of the features (faiss), and no learning.

Both share :class:`~sgl.models.gsl.RWGSL`'s ``learn(graph, pseudo_labels=None)`` API (they
ignore the pseudo-labels).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

import numpy as np
import torch
import torch.nn.functional as F

from sgl._checks import check_int
from sgl.data import Graph
from sgl.errors import ConfigError, GraphError
from sgl.models.gsl.graphs import _undirected, _with_node_data, check_gsl_graph

__all__ = ["KNNGraphConfig", "KNNGraph", "NoStructureLearning"]


@dataclass
class KNNGraphConfig:
    """Hyper-parameters of :class:`KNNGraph`.

    ``k`` neighbours per node by cosine similarity of the features; exact search
    (``faiss.IndexFlatIP``) up to ``exact_max_nodes`` nodes, an inverted-file index with
    ``nlist = 4 sqrt(N)`` lists and ``nprobe`` probes above. ``combine="replace"`` returns
    the kNN graph alone, ``"union"`` adds its edges to the input graph.
    """

    k: int = 10
    exact_max_nodes: int = 50_000
    nprobe: int = 8
    combine: str = "replace"
    train_sample: int = 100_000

    def __post_init__(self) -> None:
        for name in ("k", "exact_max_nodes", "nprobe", "train_sample"):
            check_int(getattr(self, name), f"RWGSL {name}", 1)  # verbatim: these messages say "RWGSL k ..."
        if self.combine not in ("replace", "union"):
            raise ConfigError(f"KNNGraph combine must be 'replace' or 'union', got {self.combine!r}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class KNNGraph:
    """Baseline structure learner: a symmetric cosine kNN graph of the node features (faiss).

    Example:
        >>> import sgl
        >>> from sgl.models.gsl import KNNGraph, KNNGraphConfig
        >>> graph = sgl.datasets.load("karate")
        >>> knn = KNNGraph(KNNGraphConfig(k=3)).learn(graph)
        >>> knn.is_symmetric(), knn.num_edges >= 34 * 3
        (True, True)
    """

    def __init__(self, config: Optional[KNNGraphConfig] = None, seed: int = 0, progress: bool = False) -> None:
        if config is not None and not isinstance(config, KNNGraphConfig):
            raise ConfigError(f"KNNGraph takes a KNNGraphConfig, got {type(config).__name__}")
        self.config = config or KNNGraphConfig()
        self.seed = int(seed)
        self.history: List[Dict[str, int]] = []

    def __repr__(self) -> str:
        return f"KNNGraph(k={self.config.k}, combine={self.config.combine!r})"

    def learn(self, graph: Graph, pseudo_labels: Optional[torch.Tensor] = None) -> Graph:
        import faiss

        graph = check_gsl_graph(graph, "KNNGraph")
        cfg = self.config
        n = graph.num_nodes
        if n < 2:
            raise GraphError("KNNGraph needs at least 2 nodes")
        k = min(cfg.k, n - 1)
        x = np.ascontiguousarray(F.normalize(graph.x.float(), dim=1).numpy())
        d = x.shape[1]
        if n <= cfg.exact_max_nodes:
            index = faiss.IndexFlatIP(d)
        else:
            nlist = int(4 * math.sqrt(n))
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
            rng = np.random.default_rng(self.seed)
            sample = x[rng.choice(n, size=min(n, max(cfg.train_sample, 40 * nlist)), replace=False)]
            index.train(sample)
            index.nprobe = cfg.nprobe
        index.add(x)
        _, neighbors = index.search(x, k + 1)  # the node itself is usually its own best match
        src = torch.from_numpy(neighbors).reshape(-1)
        dst = torch.arange(n).repeat_interleave(k + 1)
        keep = (src >= 0) & (src != dst)
        edges = torch.stack([src[keep], dst[keep]])
        if cfg.combine == "union":
            edges = torch.cat([edges, graph.edge_index], dim=1)
        out = _undirected(_with_node_data(graph, edges))
        self.history = [{"edges": out.num_edges}]
        return out


class NoStructureLearning:
    """Baseline: the input graph, made symmetric, de-duplicated and loop-free (no learning).

    Example:
        >>> import sgl
        >>> graph = sgl.datasets.load("karate")
        >>> NoStructureLearning().learn(graph).num_edges == graph.num_edges
        True
    """

    def __init__(self, config: Any = None, seed: int = 0, progress: bool = False) -> None:
        self.config = config
        self.history: List[Dict[str, int]] = []

    def __repr__(self) -> str:
        return "NoStructureLearning()"

    def learn(self, graph: Graph, pseudo_labels: Optional[torch.Tensor] = None) -> Graph:
        if not isinstance(graph, Graph):
            raise GraphError(f"NoStructureLearning takes an sgl.data.Graph, got {type(graph).__name__}")
        return _undirected(graph)
