"""HaCore's numba kernels (sgl.federated.selection.hamming_kernels) against brute force."""
import numpy as np
import pytest

from sgl.errors import ConfigError
from sgl.federated.selection import hacore_coreset, hamming, hamming_kmedoids, pack_bits
from sgl.federated.selection.hacore import _assign
from sgl.federated.selection.hamming_kernels import (
    bitcount_medoids, flip_masks, nearest_probe, nearest_scan, row_keys,
)


def _sig(n, bits, seed):
    return np.random.default_rng(seed).random((n, bits)) < 0.5


@pytest.mark.parametrize("bits", [40, 64, 130])  # one partial word, one full word, three words
def test_scan_is_the_brute_force_nearest_medoid_with_ties_to_the_lowest_position(bits):
    sig = _sig(400, bits, bits)
    sig[5] = sig[7]  # duplicate medoids: a tie that must go to the lower position
    words = pack_bits(sig)
    med = np.array([7, 5, 3, 100, 250, 399])
    d = (sig[:, None] != sig[None, med]).sum(-1)
    best, dist = nearest_scan(words, np.ascontiguousarray(words[med]))
    assert np.array_equal(dist, d.min(1)) and np.array_equal(best, d.argmin(1))  # argmin: the first minimum
    assert best[5] == 0 and best[7] == 0


def test_probe_with_every_bucket_is_exact_and_radius_limits_the_candidates():
    sig = _sig(500, 64, 1)
    words = pack_bits(sig)
    med = np.random.default_rng(2).choice(500, 60, replace=False)
    med_words = np.ascontiguousarray(words[med])
    d = hamming(words, med_words)
    key_pos = np.array([3, 17, 40, 41, 63], dtype=np.int64)
    best, dist = nearest_probe(words, med_words, key_pos, flip_masks(5, 5))  # all 32 buckets: exact
    assert np.array_equal(best, d.argmin(1)) and np.array_equal(dist, d.min(1))
    # radius 1: the answer is the nearest medoid among those whose key is within 1 of the row's key
    keys, med_keys = row_keys(words, key_pos), row_keys(med_words, key_pos)
    near = np.bitwise_count((keys[:, None] ^ med_keys[None, :]).astype(np.uint64)) <= 1
    best, dist = nearest_probe(words, med_words, key_pos, flip_masks(5, 1))
    has = near.any(1)
    masked = np.where(near, d, 1 << 30)
    assert np.array_equal(best[has], masked[has].argmin(1)) and np.array_equal(dist[has], masked[has].min(1))
    assert np.array_equal(dist[~has], d[~has].min(1))  # empty probes fall back to the exact scan
    assert len(flip_masks(9, 2)) == 46 and flip_masks(9, 2)[0] == 0


def test_row_keys_read_the_chosen_bits():
    sig = _sig(50, 100, 3)
    pos = np.array([0, 64, 99, 5], dtype=np.int64)
    expect = (sig[:, pos] * (1 << np.arange(4))).sum(1)
    assert np.array_equal(row_keys(pack_bits(sig), pos), expect)


def test_bit_count_medoid_is_the_brute_force_medoid_of_every_cluster():
    sig = _sig(300, 72, 4)
    assign = np.random.default_rng(5).integers(0, 7, 300)
    med = bitcount_medoids(sig.view(np.uint8), assign, 7)
    full = (sig[:, None] != sig[None]).sum(-1)
    for c in range(7):
        rows = np.flatnonzero(assign == c)
        cost = full[np.ix_(rows, rows)].sum(1)
        assert med[c] == rows[np.argmin(cost)]  # exact, ties to the lowest row


def test_kmedoids_keeps_each_medoid_in_its_own_cluster_and_validates_index_bits():
    sig = _sig(200, 64, 6)
    med, assign = hamming_kmedoids(sig, 20, iters=2, seed=1)
    assert len(set(med.tolist())) == 20 and np.array_equal(assign[med], np.arange(20))
    exact = _assign(pack_bits(sig), med, 0, 0)
    d = hamming(pack_bits(sig), pack_bits(sig[med]))
    assert np.array_equal(d[np.arange(200), exact], d.min(1))
    with pytest.raises(ConfigError, match="index_bits"):
        hamming_kmedoids(sig, 5, index_bits=30)
    with pytest.raises(ConfigError, match="index_bits"):
        hacore_coreset([sig[:, :3].astype(float)], np.zeros(200, dtype=int), 10, bits=8, index_bits=9)


@pytest.mark.parametrize("bits,patterns,iters", [(48, 25, 2), (100, 25, 2), (64, 240, 4), (100, 240, 4)])
def test_exact_kmedoids_on_duplicated_signatures_matches_a_brute_force_reference(bits, patterns, iters):
    rng = np.random.default_rng(bits + patterns)
    patterns = rng.random((patterns, bits)) < 0.5
    sig = patterns[rng.integers(0, len(patterns), 240)]  # 25 patterns: rows share signatures, assigned once
    k, seed = 12, 3  # 4 rounds: the scan after the first compares a row only with the medoids that moved
    full = (sig[:, None] != sig[None]).sum(-1)
    med = np.sort(np.random.default_rng(seed).choice(240, k, replace=False))
    for rnd in range(iters + 1):
        assign = full[:, med].argmin(1)
        assign[med] = np.arange(k)
        if rnd < iters:
            med = np.array([np.flatnonzero(assign == c)[full[np.ix_(assign == c, assign == c)].sum(1).argmin()]
                            for c in range(k)])
    got_med, got_assign = hamming_kmedoids(sig, k, iters=iters, seed=seed, index_bits=0)
    assert np.array_equal(got_med, med) and np.array_equal(got_assign, assign)


@pytest.mark.parametrize("nbits", [64, 100])
def test_indexed_kmedoids_assigns_each_distinct_signature_like_a_per_row_probe(nbits):
    from sgl.federated.selection.hacore import _key_bits

    rng = np.random.default_rng(9)
    sig = (rng.random((30, nbits)) < 0.5)[rng.integers(0, 30, 300)]
    words, bits = pack_bits(sig), sig.view(np.uint8)
    k, iters, seed = 15, 2, 4
    draw = np.random.default_rng(seed)
    med = np.sort(draw.choice(300, k, replace=False))
    key_pos = _key_bits(bits, 6, draw)
    for rnd in range(iters + 1):  # reference: every row probes on its own, no deduplication
        assign = nearest_probe(words, np.ascontiguousarray(words[med]), key_pos, flip_masks(6, 2))[0]
        assign[med] = np.arange(k)
        if rnd < iters:
            med = bitcount_medoids(bits, assign, k)
    got_med, got_assign = hamming_kmedoids(sig, k, iters=iters, seed=seed, index_bits=6)
    assert np.array_equal(got_med, med) and np.array_equal(got_assign, assign)


def test_offsets_let_a_one_column_client_tell_magnitudes_apart_and_are_validated():
    from sgl.federated.selection import simhash_signatures

    x = np.linspace(-3, 3, 200)[:, None]
    plain = simhash_signatures([x], 32, seed=0)
    lifted = simhash_signatures([x], 32, seed=0, offset=1.0)
    assert len(np.unique(plain, axis=0)) == 2  # plain SimHash of one column: only its sign
    assert len(np.unique(lifted, axis=0)) > 10  # random offsets: thresholds along the column
    d = (lifted[:, None] != lifted[None]).sum(-1)
    assert d[0, 1] <= d[0, 100] <= d[0, 199]  # farther values, more differing bits
    with pytest.raises(ConfigError, match="offset"):
        simhash_signatures([x], 32, offset=-1.0)


def test_cost_model_scans_small_classes_and_indexes_large_ones():
    from sgl.federated.selection.hacore import _auto_index_bits

    assert _auto_index_bits(37, 121, 64) == 0  # digits-sized class: the exact scan is cheapest
    assert _auto_index_bits(1152, 3341, 64) == 0  # Caravan-sized: the vectorised scan still wins
    assert 9 <= _auto_index_bits(4552, 3262, 64) < _auto_index_bits(6800, 20000, 64) <= 16


def test_raw_exact_medoids_equal_brute_force():
    from sgl.federated.selection.raw_kmedoids import exact_medoids

    rng = np.random.default_rng(3)
    x = rng.normal(size=(120, 5))
    assign = rng.integers(0, 7, size=120)
    assign[:7] = np.arange(7)
    got = exact_medoids(x, assign, 7)
    for c in range(7):
        members = np.flatnonzero(assign == c)
        d = np.sqrt(((x[members][:, None, :] - x[members][None, :, :]) ** 2).sum(-1)).sum(1)
        assert got[c] == members[d.argmin()]


@pytest.mark.parametrize("d", [1, 7, 40])
def test_packed_signatures_equal_the_projection_sign_bits(d):
    from sgl.federated.selection.signature_kernels import simhash_into

    rng = np.random.default_rng(d)
    x = rng.normal(size=(600, d))  # 600 rows: two full chunks and a partial one
    rt, shift = rng.normal(size=(90, d)), rng.normal(size=90)
    words = np.zeros((600, 3), dtype=np.uint64)
    simhash_into(x, rt, shift, 30, words)  # bits 30..119: across the first word boundary
    expect = np.zeros((600, 192), dtype=bool)
    expect[:, 30:120] = x @ rt.T > shift
    close = np.abs(x @ rt.T - shift) < 1e-4  # float32 products: only these could round the other way
    assert close.mean() < 1e-3
    got = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little").astype(bool)
    assert np.array_equal(got[:, 30:120][~close], expect[:, 30:120][~close])
    assert not got[:, :30].any() and not got[:, 120:].any()


def test_signature_words_match_the_boolean_signatures_and_distinct_rows_invert():
    from sgl.federated.selection import simhash_signatures, simhash_words
    from sgl.federated.selection.hamming_kernels import distinct_rows

    rng = np.random.default_rng(11)
    blocks = [rng.normal(size=(200, 5)), rng.integers(0, 2, size=(200, 1)).astype(float)]
    words = simhash_words(blocks, 100, seed=2, offset=1.0)
    assert np.array_equal(words, pack_bits(simhash_signatures(blocks, 100, seed=2, offset=1.0)))
    dup = words[rng.integers(0, 40, 500)]
    uniq, inv = distinct_rows(dup)
    assert np.array_equal(uniq[inv], dup) and len(uniq) == len(np.unique(dup, axis=0))


def test_both_coresets_start_from_the_same_initial_medoids():
    from sgl.federated.selection import initial_medoids, raw_kmedoids_coreset

    rng = np.random.default_rng(12)
    y = rng.integers(0, 3, 300)
    blocks = [rng.normal(size=(300, 4)), rng.normal(size=(300, 3))]
    order, starts, ks, init = initial_medoids(y, 45, seed=5)
    offs = np.r_[0, np.cumsum(ks)]
    assert ks.sum() == 45 and np.array_equal(ks, np.round(45 * np.bincount(y) / 300))
    for c in range(3):
        pos = init[offs[c]:offs[c + 1]]
        assert np.all(np.diff(pos) > 0) and pos[-1] < starts[c + 1] - starts[c]
        assert np.all(y[order[starts[c]:starts[c + 1]]] == c)
    expect = np.sort(np.concatenate([order[starts[c] + init[offs[c]:offs[c + 1]]] for c in range(3)]))
    hc = hacore_coreset(blocks, y, 45, iters=0, seed=5, method="kmedoids")  # no update round: the coresets are the initial medoids
    raw = raw_kmedoids_coreset(blocks, y, 45, iters=0, seed=5)
    assert np.array_equal(np.sort(hc.ids), expect) and np.array_equal(np.sort(raw.ids), expect)
    assert hc.weights.sum() == raw.weights.sum() == 300
    assert not np.array_equal(initial_medoids(y, 45, seed=6)[3], init)


def test_coresets_refuse_fewer_medoids_than_classes_and_misaligned_labels():
    from sgl.federated.selection import raw_kmedoids_coreset

    rng = np.random.default_rng(13)
    blocks, y = [rng.normal(size=(60, 3))], np.arange(60) % 4
    for fn in (hacore_coreset, raw_kmedoids_coreset):
        with pytest.raises(ConfigError, match="4 classes"):
            fn(blocks, y, 3)
        with pytest.raises(ConfigError, match="one per row"):
            fn(blocks, y[:50], 10)
