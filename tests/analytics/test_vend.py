"""VEND codes: exactness against brute force, the window score, soundness under updates, baselines, errors."""
import numpy as np
import pytest

from sgl.analytics.vend import (CodeLayout, EdgeBloomFilter, MemoryAdjacency, OneHashVENDCodes, PairType, RangeFilter,
                                VENDCodes, VertexBloomFilter)
from sgl.analytics.vend.encode import choose_windows, hash_counts
from sgl.analytics.vend.layout import bitmap_slot, bitmap_slots, get_field, hash_keys, or_field
from sgl.datasets.powerlaw import chung_lu_edges
from sgl.errors import ConfigError, GraphError

NEIGHBOR, NON, UNCERTAIN = (int(t) for t in PairType)
FILTERS = (VENDCodes, OneHashVENDCodes, VertexBloomFilter, RangeFilter)
VARIANTS = (VENDCodes, OneHashVENDCodes)       # per-vertex optimal bitmap hash count, the paper's one hash


def _random_graph(n, m, seed, hubs=0):
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, n, size=(m, 2))
    if hubs:  # a few vertices adjacent to a large share of the graph, so windows and bitmaps are used
        hub = rng.integers(0, n, size=hubs)
        edges = np.concatenate([edges, np.stack([np.repeat(hub, n // 2), rng.integers(0, n, hubs * (n // 2))], 1)])
    return edges[edges[:, 0] != edges[:, 1]]


def _dense(edges, n):
    truth = np.zeros((n, n), dtype=bool)
    truth[edges[:, 0], edges[:, 1]] = truth[edges[:, 1], edges[:, 0]] = True
    return truth


def _facebook(data_path):
    path = data_path("snap_facebook_combined", "facebook_combined.txt")
    return np.loadtxt(path, comments="#", dtype=np.int64)


def test_fields_round_trip_across_word_boundaries():
    rng = np.random.default_rng(0)
    k, rows = 3, 50
    words = np.zeros(rows * k + 1, dtype=np.uint64)
    width = 23
    row = np.repeat(np.arange(rows), 8)
    offset = np.tile(np.arange(8) * width, rows) + 5          # fields 5..188 straddle the 64-bit borders
    value = rng.integers(0, 2 ** width, size=row.size)
    or_field(words, k, row, offset, width, value)
    assert (get_field(words, k, row, offset, width) == value).all()
    assert words[-1] == 0                                       # nothing spilled past the last code


def test_layout_sizes_and_bad_k():
    layout = CodeLayout(num_nodes=4039, k=2)
    assert layout.bits == 128 and layout.id_bits == 12
    # an exact list of max_exact ids fills the code; one more would not fit
    assert layout.exact_base + layout.max_exact * layout.id_bits <= 128 < layout.exact_base + (layout.max_exact + 1) * 12
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="k"):
            CodeLayout(num_nodes=10, k=bad)
    with pytest.raises(ConfigError, match="k"):
        VENDCodes.from_edges(np.array([[0, 1]]), k=0)


@pytest.mark.parametrize("cls", FILTERS)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_every_answer_is_right_on_small_graphs(cls, k):
    """All n^2 pairs against brute force: Neighbor and NonNeighbor are always true."""
    n = 120
    edges = _random_graph(n, 600, seed=k, hubs=3)
    truth = _dense(edges, n)
    codes = cls.from_edges(edges, k=k, num_nodes=n)
    u, v = np.divmod(np.arange(n * n), n)
    answer = codes.test_batch(u, v).reshape(n, n)
    assert not (truth & (answer == NON)).any()
    assert not (~truth & (answer == NEIGHBOR)).any()
    assert (answer == NON).mean() > 0.3          # the codes do certify something
    if cls is VENDCodes:
        kinds = codes.kinds()
        assert kinds["exact"] > 0 and kinds["exact"] < n  # both exact lists and windowed codes are in use


def test_single_pair_api_and_symmetry():
    edges = np.array([[0, 1], [0, 2], [0, 3], [0, 4], [2, 3]])
    codes = VENDCodes.from_edges(edges, k=1, num_nodes=6)
    assert codes.test(0, 5) is PairType.NonNeighbor and codes.test(3, 2) is PairType.Neighbor
    u, v = np.divmod(np.arange(36), 6)
    assert (codes.test_batch(u, v) == codes.test_batch(v, u)).all()


def test_from_graph_is_the_undirected_view(small_graph):
    import torch

    from sgl.data import Graph

    directed = Graph.from_edge_index(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]]), num_nodes=6)
    codes = VENDCodes.from_graph(directed, k=1)
    assert codes.test(1, 0) is PairType.Neighbor and codes.test(4, 3) is PairType.Neighbor
    assert codes.test(0, 4) is PairType.NonNeighbor
    edges = small_graph.edge_index.numpy().T
    assert (VENDCodes.from_graph(small_graph, k=2).words == VENDCodes.from_edges(edges, k=2, num_nodes=6).words).all()


def _score(n, layout, nbrs, b, s):
    """The paper's score of window (b, s), computed directly from the bitmap the window leaves."""
    d = nbrs.size
    buckets = int(layout.hash_bits(b))
    rest = np.concatenate([nbrs[:s], nbrs[s + b:]])
    zeros = buckets - np.unique(bitmap_slot(rest, buckets)).size if buckets > 0 else 0
    return _window_score(n, nbrs, b, s, zeros / buckets if buckets else 0)


def _window_score(n, nbrs, b, s, certified):
    """Exact count inside window (b, s) plus ``certified`` times the ids outside it."""
    if b == 0:
        return n * certified
    lo = 0 if s == 0 else nbrs[s]
    hi = n - 1 if s == nbrs.size - b else nbrs[s + b - 1]
    span = hi - lo + 1
    return (span - b) + (n - span) * certified


@pytest.mark.parametrize("hashes", ["one", "optimal"])
def test_window_maximises_the_paper_score(hashes):
    """The paper's score for one hash; with the per-vertex hash count, its multi-hash form."""
    n = 5000
    rng = np.random.default_rng(3)
    layout = CodeLayout(n, 2, hashes=hashes)
    scorer = _score if hashes == "one" else _optimal_score
    lists = [np.sort(rng.choice(n, size=d, replace=False)) for d in (12, 20, 40, 90)]
    lists.append(np.sort(np.concatenate([np.arange(100, 130), rng.choice(np.arange(2000, n), 15, replace=False)])))
    ptr = np.concatenate([[0], np.cumsum([x.size for x in lists])])
    size, start, _, score = choose_windows(layout, ptr, np.concatenate(lists))
    for row, nbrs in enumerate(lists):
        best = max(scorer(n, layout, nbrs, b, s) for b in range(layout.max_window + 1)
                   for s in (range(1) if b == 0 else range(nbrs.size - b + 1)))
        assert score[row] == pytest.approx(best)
        assert scorer(n, layout, nbrs, size[row], start[row]) == pytest.approx(best)


def _optimal_score(n, layout, nbrs, b, s):
    """The multi-hash score of window (b, s), from the bitmap its h hash functions leave."""
    buckets = int(layout.hash_bits(b))
    rest = np.concatenate([nbrs[:s], nbrs[s + b:]])
    h = int(hash_counts(layout, buckets, rest.size))
    keys = hash_keys(rest)
    ones = np.unique(np.concatenate([bitmap_slots(keys, buckets, i) for i in range(h)])).size if buckets > 0 else 0
    return _window_score(n, nbrs, b, s, 1 - (ones / buckets) ** h if buckets > 0 else 0.0)


def test_hash_count_minimises_the_expected_false_positive_rate():
    layout = CodeLayout(1000, 4, hashes="optimal")
    buckets, keys = np.meshgrid(np.arange(1, 250), np.arange(1, 120))
    h = hash_counts(layout, buckets, keys)
    rates = np.stack([(1 - np.exp(-j * keys / buckets)) ** j for j in range(1, 17)])
    assert (h >= 1).all() and (h <= 16).all()
    assert np.allclose(np.take_along_axis(rates, (h - 1)[None], 0)[0], rates.min(0))
    assert (hash_counts(CodeLayout(1000, 4), buckets, keys) == 1).all()
    assert (hash_counts(layout, np.array([0, 50]), np.array([5, 0])) == 1).all()   # no bitmap / no key


def test_optimal_hashes_certify_at_least_the_one_hash_codes():
    n = 3000
    edges = chung_lu_edges(n, avg_degree=30, exponent=2.3, seed=6)
    adj = MemoryAdjacency.from_edges(edges, num_nodes=n)
    pairs = np.random.default_rng(1).integers(0, n, size=(60_000, 2))
    pairs = pairs[(pairs[:, 0] != pairs[:, 1]) & ~adj.has_edges(pairs[:, 0], pairs[:, 1])]
    for k in (2, 5):
        share = {cls: (cls.from_edges(edges, k=k, num_nodes=n).test_batch(pairs[:, 0], pairs[:, 1]) == NON).mean()
                 for cls in VARIANTS}
        assert share[VENDCodes] >= share[OneHashVENDCodes] > 0.5
        multi = VENDCodes.from_edges(edges, k=k, num_nodes=n)
        assert multi._head[:, 7].max() > 1      # some bitmaps do use several hash functions


def test_codes_of_the_one_hash_layout_are_not_read_as_multi_hash(tmp_path):
    codes = OneHashVENDCodes.from_edges(chung_lu_edges(500, seed=0), k=2, num_nodes=500)
    np.savez(tmp_path / "old.npz", words=codes.words, kind=np.array("VENDCodes"))   # a file without the hash field
    with pytest.raises(GraphError, match="hashes='one'.*rebuild"):
        VENDCodes.load(tmp_path / "old.npz")
    codes.save(tmp_path / "one.npz")
    assert (OneHashVENDCodes.load(tmp_path / "one.npz").words == codes.words).all()


def _random_updates(adj, rng, total, batch, n):
    """Yield (insert, delete) batches: random new pairs, and random existing edges to delete."""
    done = 0
    while done < total:
        ins = rng.integers(0, n, size=(batch // 2, 2))
        ins = ins[ins[:, 0] != ins[:, 1]]
        keys = adj._keys[rng.choice(adj._keys.size, size=batch // 2, replace=False)]
        dele = np.unique(np.sort(np.stack(np.divmod(keys, n), axis=1), axis=1), axis=0)
        yield ins, dele
        done += len(ins) + len(dele)


def _check_sound(codes, adj, rng):
    u, v = np.divmod(adj._keys, adj.num_nodes)
    assert not (codes.test_batch(u, v) == NON).any(), "a true edge was certified as a non-edge"
    pairs = rng.integers(0, adj.num_nodes, size=(20000, 2))
    answer = codes.test_batch(pairs[:, 0], pairs[:, 1])
    truth = adj.has_edges(pairs[:, 0], pairs[:, 1])
    assert not (truth & (answer == NON)).any() and not (~truth & (answer == NEIGHBOR)).any()
    return float((answer[~truth] == NON).mean())


def _updates_keep_codes_sound(edges, n, k, seed, cls=VENDCodes):
    rng = np.random.default_rng(seed)
    adj = MemoryAdjacency.from_edges(edges, num_nodes=n)
    codes = cls.from_edges(edges, k=k, num_nodes=n)
    before = _check_sound(codes, adj, rng)
    touched = []
    for insert, delete in _random_updates(adj, rng, total=10_000, batch=1000, n=n):
        adj.apply(insert=insert, delete=delete)
        codes.update(adj, insert=insert, delete=delete)
        touched += [insert, delete]
    after = _check_sound(codes, adj, rng)
    # every updated pair is answered right, in both directions: deleted edges are not Neighbors any more
    touched = np.concatenate(touched)
    for u, v in ((touched[:, 0], touched[:, 1]), (touched[:, 1], touched[:, 0])):
        answer, truth = codes.test_batch(u, v), adj.has_edges(u, v)
        assert not (truth & (answer == NON)).any() and not (~truth & (answer == NEIGHBOR)).any()
    # maintenance re-encodes from the current lists: certification does not decay
    fresh = _check_sound(cls.from_csr(*adj.neighbors_csr(np.arange(n)), k=k), adj, rng)
    assert after > fresh - 0.02
    return before, after


@pytest.mark.parametrize("cls", VARIANTS)
@pytest.mark.parametrize("k", [2, 5])
def test_facebook_no_false_non_neighbor_before_and_after_10000_updates(data_path, k, cls):
    edges = _facebook(data_path)
    before, after = _updates_keep_codes_sound(edges, int(edges.max()) + 1, k, seed=k, cls=cls)
    assert before > 0.95 and after > 0.9


@pytest.mark.parametrize("cls", VARIANTS)
@pytest.mark.parametrize("exponent, k", [(2.2, 2), (2.8, 5)])
def test_power_law_no_false_non_neighbor_before_and_after_10000_updates(exponent, k, cls):
    n = 20_000
    edges = chung_lu_edges(n, avg_degree=12, exponent=exponent, seed=1)
    assert np.bincount(edges.ravel(), minlength=n).max() > 40 * 12   # hubs: windowed codes are exercised
    _updates_keep_codes_sound(edges, n, k, seed=7, cls=cls)


def test_update_details():
    """Insert into an exact list, delete from a window, delete then re-insert in one batch."""
    n = 200
    edges = np.stack([np.zeros(120, np.int64), np.arange(1, 121)], axis=1)   # vertex 0: degree 120
    adj = MemoryAdjacency.from_edges(edges, num_nodes=n)
    codes = VENDCodes.from_edges(edges, k=1, num_nodes=n)
    assert codes.test(150, 151) is PairType.NonNeighbor
    insert = np.array([[150, 151], [0, 160]])
    adj.apply(insert=insert)
    stale = codes.update(adj, insert=insert)
    assert set(stale.tolist()) <= {0, 150, 151, 160} and {150, 151} <= set(stale.tolist())
    assert codes.test(150, 151) is PairType.Neighbor and codes.test(0, 160) is not PairType.NonNeighbor
    both = np.array([[0, 5]])
    adj.apply(insert=both, delete=both)
    codes.update(adj, insert=both, delete=both)
    assert codes.test(0, 5) is not PairType.NonNeighbor
    adj.apply(delete=np.array([[150, 151]]))
    codes.update(adj, delete=np.array([[150, 151]]))
    assert codes.test(150, 151) is PairType.NonNeighbor


@pytest.mark.parametrize("cls", FILTERS + (EdgeBloomFilter,))
def test_baselines_spend_equal_bits_and_stay_sound(cls):
    n = 3000
    edges = chung_lu_edges(n, avg_degree=20, seed=2)
    for k in (2, 5):
        codes = cls.from_edges(edges, k=k, num_nodes=n)
        assert codes.nbytes == n * k * 8
        assert not (codes.test_batch(edges[:, 0], edges[:, 1]) == NON).any()


def test_edge_bloom_matches_its_false_positive_rate():
    n, k = 20_000, 1
    edges = chung_lu_edges(n, avg_degree=16, seed=4)
    bloom = EdgeBloomFilter.from_edges(edges, k=k, num_nodes=n)
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, n, size=(200_000, 2))
    adj = MemoryAdjacency.from_edges(edges, num_nodes=n)
    pairs = pairs[(pairs[:, 0] != pairs[:, 1]) & ~adj.has_edges(pairs[:, 0], pairs[:, 1])]
    certified = (bloom.test_batch(pairs[:, 0], pairs[:, 1]) == NON).mean()
    expected = 1 - (1 - np.exp(-bloom.hashes * len(edges) / bloom.bits)) ** bloom.hashes
    assert certified == pytest.approx(expected, abs=0.01)


def test_vend_beats_the_same_bits_baselines_on_facebook(data_path):
    edges = _facebook(data_path)
    n = int(edges.max()) + 1
    adj = MemoryAdjacency.from_edges(edges)
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, n, size=(100_000, 2))
    pairs = pairs[~adj.has_edges(pairs[:, 0], pairs[:, 1]) & (pairs[:, 0] != pairs[:, 1])]
    share = {cls.__name__: (cls.from_edges(edges, k=2).test_batch(pairs[:, 0], pairs[:, 1]) == NON).mean()
             for cls in FILTERS + (EdgeBloomFilter,)}
    assert share["VENDCodes"] > max(share["VertexBloomFilter"], share["RangeFilter"], share["EdgeBloomFilter"])


def test_save_and_load(tmp_path):
    codes = VENDCodes.from_edges(chung_lu_edges(500, seed=0), k=2, num_nodes=500)
    codes.save(tmp_path / "c.npz")
    again = VENDCodes.load(tmp_path / "c.npz")
    assert (again.words == codes.words).all()
    with pytest.raises(GraphError, match="holds VENDCodes codes, not RangeFilter"):
        RangeFilter.load(tmp_path / "c.npz")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(GraphError, match="bad.npz"):
        VENDCodes.load(tmp_path / "bad.npz")


def test_bad_input():
    edges = np.array([[0, 1], [1, 2]])
    codes = VENDCodes.from_edges(edges, k=1, num_nodes=4)
    with pytest.raises(GraphError, match=r"vertex id 4 .* num_nodes=4; ids must be in \[0, 4\)"):
        codes.test_batch([0], [4])
    with pytest.raises(GraphError, match="vertex id -1"):
        codes.test(-1, 0)
    with pytest.raises(GraphError, match="same length"):
        codes.test_batch([0, 1], [2])
    with pytest.raises(GraphError, match="integers"):
        codes.test_batch([0.5], [1.0])
    with pytest.raises(GraphError, match=r"shape \(E, 2\)"):
        VENDCodes.from_edges(np.array([0, 1, 2]), k=1)
    with pytest.raises(GraphError, match="vertex id 9"):
        VENDCodes.from_edges(np.array([[0, 9]]), k=1, num_nodes=4)
    adj = MemoryAdjacency.from_edges(edges, num_nodes=4)
    with pytest.raises(GraphError, match=r"cannot delete edge \(0, 3\)"):
        adj.apply(delete=np.array([[0, 3]]))
    assert adj.num_edges == 2
    with pytest.raises(GraphError, match="vertex id 7"):
        codes.stale_vertices(insert=np.array([[0, 7]]))
