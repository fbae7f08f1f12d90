"""Zachary's Karate Club, built in (no download).

The graph comes from :func:`networkx.karate_club_graph`: 34 members, 78 friendships
(156 directed edges), unweighted here (networkx attaches interaction counts as weights;
the benchmark graph is unweighted, like PyG's ``KarateClub``).

Labels are the **two factions** the club split into (node attribute ``club``:
``"Mr. Hi"`` = 0, ``"Officer"`` = 1; 17 members each), i.e. Zachary's ground truth.
PyG's ``KarateClub`` instead uses 4 modularity-based communities; the faction labels
are chosen here because they are the observed outcome, not the output of a clustering.
"""
from __future__ import annotations

import numpy as np
import torch

from sgl.data import Graph
from sgl.datasets.splits import per_class_split

__all__ = ["load_karate"]

_FACTIONS = {"Mr. Hi": 0, "Officer": 1}


def load_karate(train_per_class: int = 4, val_per_class: int = 5, seed: int = 0) -> Graph:
    """Zachary's Karate Club: 34 nodes, 156 directed edges, 34 one-hot features, 2 classes.

    The split is seeded and per class (:func:`sgl.datasets.per_class_split`): by default
    4 training and 5 validation nodes per faction, the other 16 nodes for testing.

    Example:
        >>> from sgl.datasets import load_karate
        >>> g = load_karate()
        >>> g.num_nodes, g.num_edges, g.num_features, g.num_classes
        (34, 156, 34, 2)
        >>> g.split_sizes()
        (8, 10, 16)
    """
    import networkx as nx

    nxg = nx.karate_club_graph()
    n = nxg.number_of_nodes()
    pairs = np.asarray(list(nxg.edges()), dtype=np.int64).T
    edge_index = torch.from_numpy(np.concatenate([pairs, pairs[::-1]], axis=1))
    y = torch.tensor([_FACTIONS[nxg.nodes[v]["club"]] for v in range(n)], dtype=torch.int64)
    train, val, test = per_class_split(y, train_per_class, val_per_class, seed=seed)
    graph = Graph.from_edge_index(
        edge_index, num_nodes=n, x=torch.eye(n), y=y,
        train_mask=train, val_mask=val, test_mask=test, name="karate",
    )
    # Sort neighbours by id so the structure does not depend on networkx's edge order.
    return graph.deduplicate()
