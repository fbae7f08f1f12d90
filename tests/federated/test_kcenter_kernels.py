"""HaCore's farthest-first (k-center) kernels against brute force, and the coreset they build."""
import numpy as np
import pytest

from sgl.errors import ConfigError
from sgl.federated.selection import hacore_coreset, initial_medoids
from sgl.federated.selection.kcenter_kernels import farthest_first, kcenter_classes


def _hamming(w):
    return np.bitwise_count(w[:, None, :] ^ w[None, :, :]).sum(-1)


def _check_one_class(w, k, first):
    n = len(w)
    centres, cluster = kcenter_classes(w, np.arange(n), np.array([0, n]), np.array([k]), np.array([first]))
    d = _hamming(w)
    distinct = len({tuple(r) for r in w})
    assert len(set(centres.tolist())) == k and d[centres[0], first] == 0
    assert np.array_equal(cluster[centres], np.arange(k))  # every centre heads its own cluster
    covered = d[:, centres[0]].copy()
    for t in range(1, min(k, distinct)):  # Gonzalez: each new centre is a farthest row from the earlier ones
        assert covered[centres[t]] == covered.max() > 0
        covered = np.minimum(covered, d[:, centres[t]])
    if k <= distinct:  # exact nearest centre, ties to the earlier centre
        assert np.array_equal(cluster, d[:, centres].argmin(1))
    else:  # every signature is a centre: its rows are shared between its own centres
        assert np.all(d[np.arange(n), centres[cluster]] == 0)
        assert np.bincount(cluster, minlength=k).min() >= 1


@pytest.mark.parametrize("words", [1, 2, 3])
def test_farthest_first_equals_brute_force(words):
    rng = np.random.default_rng(words)
    for trial in range(40):
        n = int(rng.integers(2, 120))
        nbits = int(rng.integers(1, 64))
        w = rng.integers(0, 2 ** 63, size=(n, words), dtype=np.uint64) & np.uint64((1 << nbits) - 1)
        if trial % 2:  # many repeated signatures, so k often exceeds the distinct ones
            w = w[rng.integers(0, max(1, n // 5), n)]
        _check_one_class(w, int(rng.integers(1, n + 1)), int(rng.integers(0, n)))


def test_pivot_blocks_change_nothing():
    rng = np.random.default_rng(3)
    w = rng.integers(0, 2 ** 63, size=(700, 2), dtype=np.uint64) & np.uint64(0xFFFF)
    w = np.unique(w, axis=0)
    ref = farthest_first(w, 200, 5, 1 << 20)  # one block: the plain scan
    for block in (1, 7, 64):
        got = farthest_first(w, 200, 5, block)
        d = _hamming(w)
        # the same covering radius after every step (ties may pick different rows)
        for t in (10, 100, 199):
            assert d[:, got[0][:t]].min(1).max() == d[:, ref[0][:t]].min(1).max()


def test_kcenter_coreset_is_per_class_weighted_and_seeded():
    rng = np.random.default_rng(7)
    y = rng.integers(0, 3, 400)
    blocks = [y[:, None] + rng.normal(size=(400, 4)), rng.normal(size=(400, 2))]
    core = hacore_coreset(blocks, y, 60, seed=1)
    _, _, ks, _ = initial_medoids(y, 60, seed=1)
    assert len(np.unique(core.ids)) == 60 and core.weights.sum() == 400 and core.weights.min() >= 1
    assert np.array_equal(np.bincount(y[core.ids], minlength=3), ks)
    again = hacore_coreset(blocks, y, 60, seed=1)
    assert np.array_equal(core.ids, again.ids) and np.array_equal(core.weights, again.weights)
    assert not np.array_equal(np.sort(hacore_coreset(blocks, y, 60, seed=2).ids), np.sort(core.ids))


def test_kcenter_keeps_duplicate_rows_as_extra_centres():
    rng = np.random.default_rng(11)
    base = rng.normal(size=(5, 3))
    x = base[np.repeat(np.arange(5), [40, 20, 10, 5, 5])]  # 80 rows, 5 distinct
    core = hacore_coreset([x], np.zeros(80, dtype=int), 16, bits=64, seed=0)
    assert len(np.unique(core.ids)) == 16 and core.weights.sum() == 80
    groups = np.repeat(np.arange(5), [40, 20, 10, 5, 5])[core.ids]
    # D'Hondt: 16 centres over rows 40/20/10/5/5 -> 8/4/2/1/1, each centre weighted by its share
    assert np.array_equal(np.bincount(groups, minlength=5), [8, 4, 2, 1, 1])
    assert np.all(core.weights == 5)


def test_unknown_method_is_refused():
    with pytest.raises(ConfigError, match="kcenter"):
        hacore_coreset([np.ones((10, 2))], np.zeros(10, dtype=int), 2, method="kmeans")
