r"""Contextual stochastic block model (CSBM) graphs with a controllable homophily.

The CSBM (Deshpande et al., "Contextual Stochastic Block Models", NeurIPS 2018) couples
a block-model graph with Gaussian node features whose mean depends on the class. Here:

* classes are balanced (``num_nodes // num_classes`` nodes each, the remainder spread
  over the first classes) and randomly assigned to node ids;
* ``num_nodes * avg_degree / 2`` undirected edges are drawn in :math:`O(E)`: a source
  uniformly at random, then with probability ``homophily`` a destination uniformly from
  the source's class and otherwise from a uniformly chosen *other* class (per-class node
  index arrays make both draws vectorized lookups, never an :math:`O(N^2)` matrix);
* edges are symmetrized and deduplicated and self-loops dropped, so the edge homophily
  (fraction of edges joining same-class nodes) is ``homophily`` up to sampling noise;
* features are ``mu[y] + noise``, with class means ``mu ~ N(0, feature_signal^2)`` and
  noise ``N(0, feature_noise^2)``: a larger signal-to-noise ratio makes the features
  alone more informative.
"""
from __future__ import annotations

import numpy as np
import torch

from sgl._checks import check_int, check_real
from sgl.data import Graph
from sgl.datasets.edges import csr_graph, edges_to_csr
from sgl.datasets.splits import planetoid_split
from sgl.errors import ConfigError

__all__ = ["csbm"]

# Rows per chunk when adding class means to the noise: bounds the temporary memory.
_FEATURE_CHUNK = 1 << 16


def _check_nonnegative(value: object, name: str) -> float:
    # sgl._checks words a one-sided bound "a number >= 0.0"; this module always said "in >= 0.0".
    try:
        return check_real(value, name, 0.0)
    except ConfigError:
        raise ConfigError(f"{name} must be a number in >= 0.0, got {value!r}") from None


def _sample_edges(y: np.ndarray, num_classes: int, num_edges: int, homophily: float,
                  rng: np.random.Generator) -> tuple:
    n = y.size
    by_class = np.argsort(y, kind="stable")  # node ids grouped by class
    sizes = np.bincount(y, minlength=num_classes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    src = rng.integers(0, n, size=num_edges)
    cls = y[src]
    if num_classes > 1:
        other = rng.random(num_edges) >= homophily
        # A uniform shift in 1..C-1 picks each other class with equal probability.
        shift = rng.integers(1, num_classes, size=num_edges)
        cls = np.where(other, (cls + shift) % num_classes, cls)
    offset = (rng.random(num_edges) * sizes[cls]).astype(np.int64)
    dst = by_class[starts[cls] + offset]
    return src, dst


def csbm(
    num_nodes: int,
    num_classes: int = 2,
    avg_degree: float = 10.0,
    num_features: int = 128,
    homophily: float = 0.8,
    feature_signal: float = 1.0,
    feature_noise: float = 1.0,
    train_per_class: int = 20,
    num_val: int = 500,
    num_test: int = 1000,
    seed: int = 0,
) -> Graph:
    """A seeded contextual stochastic block model graph (undirected, no self-loops).

    Args:
        num_nodes: number of nodes (``>= num_classes``).
        num_classes: number of balanced classes.
        avg_degree: expected number of neighbours per node (``num_nodes * avg_degree / 2``
            undirected edges are drawn; duplicates and self-loops removed afterwards).
        num_features: feature dimension.
        homophily: probability in ``[0, 1]`` that an edge joins two nodes of the same class.
        feature_signal: standard deviation of the class-mean entries.
        feature_noise: standard deviation of the per-node Gaussian noise.
        train_per_class, num_val, num_test: the random Planetoid-style split
            (:func:`sgl.datasets.planetoid_split`).
        seed: the same seed always gives the same graph, features and split.

    Builds a 1M-node, ~10M-edge, 128-feature graph in a few seconds (memory is dominated
    by the ``num_nodes x num_features`` float32 features).

    Example:
        >>> from sgl.datasets import csbm
        >>> g = csbm(1000, num_classes=4, avg_degree=8, num_features=16, homophily=0.9, seed=0)
        >>> g.num_nodes, g.num_features, g.num_classes, bool(g.is_symmetric()), g.has_self_loops()
        (1000, 16, 4, True, False)
    """
    n = check_int(num_nodes, "num_nodes", 1)
    num_classes = check_int(num_classes, "num_classes", 1)
    num_features = check_int(num_features, "num_features", 1)
    if num_classes > n:
        raise ConfigError(f"num_classes={num_classes} exceeds num_nodes={n}; every class needs at least one node")
    avg_degree = _check_nonnegative(avg_degree, "avg_degree")
    homophily = check_real(homophily, "homophily", 0.0, 1.0)
    if num_classes == 1 and homophily < 1.0:
        raise ConfigError(f"homophily={homophily} needs num_classes >= 2 (one class makes every edge homophilous)")
    feature_signal = _check_nonnegative(feature_signal, "feature_signal")
    feature_noise = _check_nonnegative(feature_noise, "feature_noise")
    for value, name in ((train_per_class, "train_per_class"), (num_val, "num_val"), (num_test, "num_test")):
        check_int(value, name, 0)
    check_int(seed, "seed")

    rng = np.random.default_rng(int(seed))
    y = rng.permutation(np.arange(n, dtype=np.int64) % num_classes)
    num_draws = int(round(n * avg_degree / 2))
    src, dst = _sample_edges(y, num_classes, num_draws, homophily, rng)
    indptr, indices, _ = edges_to_csr(src, dst, n, undirected=True, remove_self_loops=True)
    del src, dst

    means = (rng.standard_normal((num_classes, num_features), dtype=np.float32) * feature_signal)
    x = rng.standard_normal((n, num_features), dtype=np.float32)
    x *= np.float32(feature_noise)
    for start in range(0, n, _FEATURE_CHUNK):
        stop = min(start + _FEATURE_CHUNK, n)
        x[start:stop] += means[y[start:stop]]

    labels = torch.from_numpy(y)
    train, val, test = planetoid_split(labels, train_per_class, num_val, num_test, seed=int(seed))
    return csr_graph(indptr, indices, x=torch.from_numpy(x), y=labels,
                     train_mask=train, val_mask=val, test_mask=test, name="csbm")
