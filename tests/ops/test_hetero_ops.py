"""Heterogeneous propagation: NARS vs homogeneous propagation, metapaths vs a Python loop."""
import pytest
import torch

from sgl.data import HeteroGraph
from sgl.errors import FeatureError, GraphError
from sgl.ops import (
    NormalizedAdjacency, enumerate_metapaths, fill_featureless, mean_adjacency, metapath_features,
    metapath_label_features, metapath_name, nars_propagate, propagate_hops, sample_relation_subsets,
)


def random_hetero(seed=0, d=3):
    g = torch.Generator().manual_seed(seed)
    counts = {"p": 12, "a": 9, "s": 4}

    def edges(n_src, n_dst, m):
        return torch.stack([torch.randint(0, n_src, (m,), generator=g), torch.randint(0, n_dst, (m,), generator=g)])

    rel = {("a", "writes", "p"): edges(9, 12, 20), ("s", "has", "p"): edges(4, 12, 12),
           ("p", "cites", "p"): edges(12, 12, 15)}
    x = {t: torch.randn(n, d, generator=g) for t, n in counts.items()}
    return HeteroGraph.from_edge_index(counts, rel, x_dict=x, target="p", y=torch.randint(0, 3, (12,), generator=g),
                                       train_mask=torch.arange(6))


_CACHE = {}


def neighbours(hg, dst, src, node):
    """Python reference: the ``src`` neighbours of ``node`` (both directions, with multiplicity)."""
    key = (id(hg), dst, src)
    if key not in _CACHE:
        lists = {}
        for (s, r, d) in hg.edge_types:
            for u, v in hg.edge_index((s, r, d)).t().tolist():
                if s == src and d == dst:
                    lists.setdefault(v, []).append(u)
                if d == src and s == dst:
                    lists.setdefault(u, []).append(v)
        _CACHE[key] = (hg, lists)
    return _CACHE[key][1].get(node, [])


def loop_metapath(hg, path, node, x_dict):
    if len(path) == 1:
        return x_dict[path[0]][node]
    nbrs = neighbours(hg, path[0], path[1], node)
    if not nbrs:
        return torch.zeros(x_dict[path[-1]].size(1))
    return torch.stack([loop_metapath(hg, path[1:], v, x_dict) for v in nbrs]).mean(0)


def test_mean_adjacency_matches_loop():
    hg = random_hetero()
    adj = mean_adjacency(hg, "p", "p").to_dense()
    for v in range(12):
        nbrs = neighbours(hg, "p", "p", v)
        ref = torch.zeros(12)
        for u in nbrs:
            ref[u] += 1.0 / len(nbrs)
        assert torch.allclose(adj[v], ref)
    with pytest.raises(GraphError, match="no relation joins"):
        mean_adjacency(hg, "a", "s")


@pytest.mark.parametrize("k", [1, 3])
def test_nars_full_set_equals_homogeneous_propagation(k):
    hg = random_hetero(seed=k)
    full = hg.edge_types
    hops = nars_propagate(hg, [full, [full[0]]], k)
    view = hg.to_homogeneous(full, symmetric=True)
    ref = propagate_hops(view.graph, view.graph.x, k, NormalizedAdjacency(r=0.0, self_loops=False))
    target = view.global_ids("p")
    for hop in range(k + 1):
        assert hops[hop].shape == (2, 12, 3)
        assert torch.allclose(hops[hop][0], ref[hop][target], atol=1e-5)
    sub = hg.to_homogeneous([full[0]], symmetric=True)
    ref_sub = propagate_hops(sub.graph, sub.graph.x, k, NormalizedAdjacency(r=0.0, self_loops=False))
    assert torch.allclose(hops[k][1], ref_sub[k][target], atol=1e-5)
    assert not torch.allclose(hops[k][0], hops[k][1])


def test_relation_subsets():
    hg = random_hetero()
    subsets = sample_relation_subsets(hg, 100)
    assert len(subsets) == 7 and subsets[-1] == hg.edge_types   # every non-empty subset touches p
    few = sample_relation_subsets(hg, 3, seed=1)
    assert len(few) == 3 and few[-1] == hg.edge_types and len({tuple(s) for s in few}) == 3
    assert few == sample_relation_subsets(hg, 3, seed=1)


def test_metapath_features_equal_python_loop():
    hg = random_hetero(seed=4)
    feats = metapath_features(hg, 2)
    names = [metapath_name(p) for p in feats]
    assert names[:4] == ["p", "p-a", "p-s", "p-p"] and "p-a-p" in names and "p-p-s" in names
    assert len(names) == len(enumerate_metapaths(hg, 2))
    for path, value in feats.items():
        ref = torch.stack([loop_metapath(hg, path, v, hg.x_dict) for v in range(12)])
        assert torch.allclose(value, ref, atol=1e-5), metapath_name(path)


def test_label_features_remove_own_label():
    hg = random_hetero(seed=5)
    labels = torch.zeros(12, 3)
    labels[torch.arange(6), hg.y[:6]] = 1.0
    out = metapath_label_features(hg, labels, 2)
    assert {metapath_name(p) for p in out} == {"p-p", "p-a-p", "p-s-p", "p-p-p"}
    kept = metapath_label_features(hg, labels, 2, remove_self=False)
    for path in (("p", "a", "p"), ("p", "s", "p"), ("p", "p")):
        # the own-label share is what a walk along the metapath brings back to its start
        for v in range(12):
            ref = torch.zeros(3)
            nbrs = neighbours(hg, path[0], path[1], v)
            for u in nbrs:
                back = [v2 for v2 in (neighbours(hg, path[1], path[2], u) if len(path) == 3 else [u])]
                ref += sum((labels[w] for w in back if w != v), torch.zeros(3)) / max(len(back), 1) / len(nbrs)
            assert torch.allclose(out[path][v], ref, atol=1e-5), (path, v)
        assert (kept[path] >= out[path] - 1e-6).all()


def test_fill_featureless_mean_and_random():
    hg = random_hetero()
    bare = HeteroGraph.from_edge_index(hg.num_nodes_dict, {e: hg.edge_index(e) for e in hg.edge_types},
                                       x_dict={"p": hg.x_dict["p"]}, target="p")
    filled = fill_featureless(bare)
    ref = torch.stack([loop_metapath(bare, ("a", "p"), v, bare.x_dict) for v in range(9)])
    assert torch.allclose(filled["a"], ref, atol=1e-5)
    rand = fill_featureless(bare, "random", dim=5, seed=2)
    assert rand["s"].shape == (4, 5) and torch.equal(rand["s"], fill_featureless(bare, "random", dim=5, seed=2)["s"])


def test_errors():
    hg = random_hetero()
    bare = HeteroGraph.from_edge_index(hg.num_nodes_dict, {e: hg.edge_index(e) for e in hg.edge_types},
                                       x_dict={"p": hg.x_dict["p"]}, target="p")
    with pytest.raises(FeatureError, match="have no features"):
        nars_propagate(bare, [bare.edge_types], 2)
    wide = bare.with_features({"p": hg.x_dict["p"], "a": torch.ones(9, 7), "s": torch.ones(4, 3)})
    with pytest.raises(FeatureError, match="one feature width"):
        nars_propagate(wide, [wide.edge_types], 2)
    with pytest.raises(GraphError, match="does not connect: no relation joins 'a' and 's'"):
        metapath_features(hg, 2, metapaths=[("p", "a", "s")])
    with pytest.raises(GraphError, match="must start at the target"):
        metapath_features(hg, 2, metapaths=[("a", "p")])
    with pytest.raises(GraphError, match="unknown node type 'venue'"):
        metapath_features(hg, 2, metapaths=[("p", "venue")])
    with pytest.raises(FeatureError, match="has no features"):
        metapath_features(bare, 2, metapaths=[("p", "s")])
    with pytest.raises(GraphError, match="unknown relation"):
        nars_propagate(hg, [[("p", "nope", "a")]], 1)
    with pytest.raises(FeatureError, match="label_matrix must be"):
        metapath_label_features(hg, torch.zeros(5, 3), 2)
    with pytest.raises(GraphError, match="from the target back to it"):
        metapath_label_features(hg, torch.zeros(12, 3), 2, metapaths=[("p", "a")])
