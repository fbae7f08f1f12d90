import torch

from sgl.datasets import load_karate


def test_counts():
    g = load_karate()
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (34, 156, 34, 2)
    assert g.is_symmetric() and not g.has_self_loops() and g.edge_weight is None
    assert torch.equal(g.x, torch.eye(34))
    assert g.y.bincount().tolist() == [17, 17]
    assert g.y[0] == 0 and g.y[33] == 1  # Mr. Hi and the officer lead the two factions


def test_split_deterministic_and_disjoint():
    a, b = load_karate(), load_karate()
    assert torch.equal(a.train_mask, b.train_mask) and torch.equal(a.test_mask, b.test_mask)
    assert a.split_sizes() == (8, 10, 16)
    assert torch.bincount(a.y[a.train_mask]).tolist() == [4, 4]
    total = a.train_mask.int() + a.val_mask.int() + a.test_mask.int()
    assert bool((total == 1).all())
    assert not torch.equal(load_karate(seed=1).train_mask, a.train_mask)
