"""Participant selection and valuation (issue 44 item 3): Fagin's KNN, VF-PS, VFPS-SM, PS-MI, HaCore."""
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from sgl.errors import ConfigError, FeatureError
from sgl.federated.selection import (
    LocalParty, brute_force_knn, exact_shapley, facility_value, fagin_knn, greedy_select, hacore_coreset, hamming,
    hamming_kmedoids, lazy_greedy, mi_from_distances, mi_utility, pack_bits, psmi_values, random_projection,
    raw_kmedoids, raw_kmedoids_coreset, select_with_parties, selection_accuracy, simhash_signatures,
    stratified_coalitions, vf_mine, vfps_select, vfps_sm_select,
)
from sgl.federated.selection.hacore import _assign


def _toy(n=240, seed=0):
    """Four parties: 0 and 2 pure noise, 1 strongly and 3 weakly informative about a binary label."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    blocks = [rng.normal(size=(n, 3)), 1.5 * y[:, None] + rng.normal(size=(n, 3)), rng.normal(size=(n, 2)),
              0.8 * y[:, None] + rng.normal(size=(n, 2))]
    return blocks, y


def _split(x, widths):
    edges = np.cumsum([0] + list(widths))
    return [x[:, a:b] for a, b in zip(edges[:-1], edges[1:])]


# ---------------------------------------------------------------- Fagin's threshold algorithm

@pytest.mark.parametrize("widths, k", [([2, 3, 1], 5), ([4], 3), ([1, 1, 1, 1, 2], 8)])
def test_fagin_topk_equals_brute_force_knn(widths, k):
    x = np.random.default_rng(1).normal(size=(150, sum(widths)))
    res = fagin_knn([LocalParty(b) for b in _split(x, widths)], k)
    ids, dist = brute_force_knn(x, k)
    np.testing.assert_array_equal(res.ids, ids)
    np.testing.assert_allclose(res.dist, dist, rtol=1e-10)


def test_fagin_stops_early_and_counts_traffic():
    rng = np.random.default_rng(2)
    centres = rng.normal(size=(10, 4)) * 6
    x = centres[rng.integers(0, 10, 400)] + rng.normal(size=(400, 4)) * 0.3
    res = fagin_knn([LocalParty(b) for b in _split(x, [2, 2])], 5)
    assert res.depth.max() < 399  # never read a whole list
    naive = 2 * 400 * 399 * 8  # every party sends every partial distance of every query
    assert 0 < res.ledger.bytes < naive / 4 and res.ledger.random_accesses < 2 * 400 * 399 / 4
    np.testing.assert_array_equal(res.ids, brute_force_knn(x, 5)[0])


def test_fagin_with_paillier_aggregation_equals_plaintext():
    pytest.importorskip("phe")
    from sgl.federated.selection import PaillierSum

    x = np.random.default_rng(9).normal(size=(40, 4))
    parties = [LocalParty(b) for b in _split(x, [2, 2])]
    agg = PaillierSum(key_bits=1024)
    queries = np.arange(5)
    secure = fagin_knn(parties, 3, queries=queries, aggregate=agg)
    plain = fagin_knn(parties, 3, queries=queries)
    np.testing.assert_array_equal(secure.ids, plain.ids)
    np.testing.assert_allclose(secure.dist, plain.dist, atol=1e-6)
    assert agg.operations["encrypt"] == 2 * agg.operations["decrypt"] == plain.ledger.random_accesses
    assert secure.ledger.bytes > 10 * plain.ledger.bytes  # 256-byte ciphertexts instead of 8-byte floats


def test_label_aware_fagin_gives_the_exact_mi_estimate():
    blocks, y = _toy(200)
    parties = [LocalParty(b) for b in blocks]
    x = np.concatenate(blocks, axis=1)
    exact = mi_from_distances(((x[:, None] - x[None]) ** 2).sum(-1), y, 5)
    assert vf_mine(parties, [0, 1, 2, 3], y, 5) == pytest.approx(exact, abs=1e-12)
    assert vf_mine(parties, [1], y, 5) > 0.2 > abs(vf_mine(parties, [0], y, 5))


# ---------------------------------------------------------------- VF-PS and VFPS-SM

def test_vfps_and_vfps_sm_choose_the_informative_parties():
    blocks, y = _toy()
    sm = vfps_sm_select(blocks, y, l=2, num_queries=80)
    local = vfps_sm_select(blocks, y, l=2, num_queries=80, objective="facility")
    ps = vfps_select(blocks, y, l=2, tests=12, num_queries=80)
    assert sm.selected == local.selected == ps.selected == [1, 3]
    assert ps.ledger.bytes > sm.ledger.bytes > local.ledger.bytes
    assert sm.extra["joint_likelihood"] > 0.7 and local.extra["joint_likelihood"] > 0.7
    tr, te = np.arange(160), np.arange(160, 240)
    assert selection_accuracy(blocks, y, sm.selected, tr, te) > selection_accuracy(blocks, y, [0, 2], tr, te) + 0.2


def test_facility_objective_is_submodular_and_greedy_is_near_optimal():
    rng = np.random.default_rng(3)
    lik = rng.uniform(0.2, 1.0, size=(50, 7))
    f = lambda s: facility_value(lik, sorted(s), 0.5)  # noqa: E731
    for _ in range(50):  # diminishing returns: f(A + p) - f(A) >= f(B + p) - f(B) for A ⊆ B, p ∉ B
        b = set(rng.choice(7, 4, replace=False).tolist())
        a = set(list(b)[:2])
        p = int(rng.choice(sorted(set(range(7)) - b)))
        assert f(a | {p}) - f(a) >= f(b | {p}) - f(b) - 1e-12
        assert f(a) <= f(b)  # monotone
    chosen, gains = greedy_select(lik, 3, 0.5)
    best = max(f(set(c)) for c in itertools.combinations(range(7), 3))
    assert f(set(chosen)) >= (1 - 1 / math.e) * best and np.all(np.diff(gains) <= 1e-12)
    lazy, lazy_gains, evaluations = lazy_greedy(f, 7, 3)  # same picks, at most 7 + 6 + 5 evaluations
    assert lazy == chosen and np.allclose(lazy_gains, gains) and 7 <= evaluations <= 18


def test_parties_as_threads_match_the_in_process_selection():
    blocks, y = _toy(150)
    for method, fn in (("vfps", vfps_select), ("vfps_sm", vfps_sm_select)):
        out = select_with_parties(blocks, y, 2, method=method, backend="thread", num_queries=60)
        ref = fn(blocks, y, 2, num_queries=60)
        assert out["selected"] == ref.selected and out["ledger_bytes"] == ref.ledger.bytes
        np.testing.assert_allclose(out["scores"], ref.scores)
        sent = sum(p["bytes_sent"] for p in out["parties"])
        assert sent == sum(p["bytes_received"] for p in out["parties"]) > 0


def test_encrypted_aggregation_across_parties_gives_the_same_selection():
    pytest.importorskip("phe")
    blocks, y = _toy(80)
    plain = select_with_parties(blocks[:3], y, 1, method="vfps_sm", backend="thread", num_queries=6)
    secure = select_with_parties(blocks[:3], y, 1, method="vfps_sm", backend="thread", num_queries=6,
                                 key_bits=1024)
    assert secure["selected"] == plain["selected"] == [1]
    np.testing.assert_allclose(secure["scores"], plain["scores"], atol=1e-6)
    assert secure["encryptions"] > 0 and secure["parties"][1]["bytes_sent"] > 10 * plain["parties"][1]["bytes_sent"]


def test_parties_as_processes(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    blocks, y = _toy(120)
    out = select_with_parties(blocks[:2], y, 1, method="vfps_sm", backend="process", timeout=120.0,
                              num_queries=8, key_bits=1024)
    assert out["selected"] == [1] and out["encryptions"] > 0
    assert out["parties"][1]["bytes_sent"] == out["parties"][0]["bytes_received"] > 0


# ---------------------------------------------------------------- PS-MI

def test_psmi_with_all_coalitions_equals_exact_shapley():
    blocks, y = _toy(150)
    blocks.append(0.5 * blocks[1][:, :1] + np.random.default_rng(4).normal(size=(150, 1)))  # a redundant party
    res = psmi_values(blocks, y, k=4, proj_dim=3, seed=5)
    utility, _ = mi_utility(blocks, y, k=4, proj_dim=3, seed=5)
    exact = exact_shapley(utility, 5)
    np.testing.assert_allclose(res.values, exact, atol=1e-12)
    assert res.coalitions == 31 and res.values.sum() == pytest.approx(utility(frozenset(range(5))))
    assert int(np.argmax(res.values)) == 1


def test_psmi_sampling_uses_a_quarter_of_the_coalitions_and_ranks_alike():
    assert len(stratified_coalitions(8, 8, seed=0)) <= 255 / 4
    for s in range(1, 8):  # every party inside and outside every stratum
        cs = [c for c in stratified_coalitions(8, 8, seed=0) if len(c) == s]
        assert all(any(i in c for c in cs) and any(i not in c for c in cs) for i in range(8))
    blocks, y = _toy(120)
    full = psmi_values(blocks, y, k=4, proj_dim=3, per_stratum=None).values
    part = psmi_values(blocks, y, k=4, proj_dim=3, per_stratum=4)
    assert part.coalitions < 15 and np.argmax(part.values) == np.argmax(full) == 1


def test_random_projection_preserves_squared_norms_in_expectation():
    x = np.random.default_rng(6).normal(size=(1, 10))
    norms = [float((random_projection(x, 4, seed=s) ** 2).sum()) for s in range(2000)]
    assert np.mean(norms) == pytest.approx(float((x ** 2).sum()), rel=0.05)


def test_psmi_lsh_prunes_pairs_and_keeps_the_ranking():
    blocks, y = _toy(150)
    res = psmi_values(blocks, y, k=4, proj_dim=4, lsh_tables=2, lsh_bits=3)
    assert res.pairs_fraction < 0.6 and int(np.argmax(res.values)) == 1


# ---------------------------------------------------------------- HaCore

def test_signature_distance_is_monotone_in_the_angle_on_average():
    rng = np.random.default_rng(7)
    base = rng.normal(size=(400, 12))
    other = rng.normal(size=(400, 12))
    other -= (other * base).sum(1, keepdims=True) / (base * base).sum(1, keepdims=True) * base
    u, v = base / np.linalg.norm(base, axis=1, keepdims=True), other / np.linalg.norm(other, axis=1, keepdims=True)
    means = []
    for theta in np.linspace(0.1, 3.0, 8):
        x = np.concatenate([u, np.cos(theta) * u + np.sin(theta) * v])  # pairs at angle theta
        sig = simhash_signatures([x[:, :6], x[:, 6:]], bits=128, seed=1)
        words = pack_bits(sig)
        d = np.bitwise_count(words[:400] ^ words[400:]).sum(1)
        means.append(d.mean())
    assert np.all(np.diff(means) > 0)
    assert means[-1] / 128 == pytest.approx(3.0 / np.pi, abs=0.08)  # collision rate ~ 1 - theta / pi


def test_bit_counting_medoid_and_indexed_assignment_match_brute_force():
    rng = np.random.default_rng(8)
    sig = rng.random((300, 40)) < 0.5
    words = pack_bits(sig)
    full = hamming(words, words)
    assert np.array_equal(full, (sig[:, None] != sig[None]).sum(-1))
    med, assign = hamming_kmedoids(sig, 1, iters=1)
    assert full[med[0]].sum() == full.sum(1).min()  # the bit-count cost picks a true medoid
    meds = rng.choice(300, 20, replace=False)
    d = hamming(words, words[meds])
    for bits, radius in ((0, 0), (6, 6)):  # an exact scan; every bucket probed
        exact = _assign(words, meds, bits, radius)
        assert np.array_equal(d[np.arange(300), exact], d.min(1))
    probed = _assign(words, meds, 6, 2)  # HaCore's radius-2 probes: approximate
    found = d[np.arange(300), probed]
    assert (found == d.min(1)).mean() > 0.4 and (found - d.min(1)).mean() < 2.0


def test_hacore_coreset_trains_close_to_the_full_model():
    from sgl.federated.selection import weighted_accuracy

    blocks, y = _toy(400)
    x = np.concatenate(blocks, axis=1)
    tr, te = np.arange(300), np.arange(300, 400)
    base = raw_kmedoids_coreset([b[tr] for b in blocks], y[tr], size=60)
    full = weighted_accuracy(x[tr], y[tr], x[te], y[te])
    cored = []
    for seed in range(4):  # 100 test rows: one seed's coreset swings by several points, so average four
        core = hacore_coreset([b[tr] for b in blocks], y[tr], size=60, bits=64, seed=seed)
        assert len(core.ids) == 60 and core.weights.sum() == 300 and len(np.unique(core.ids)) == 60
        cored.append(weighted_accuracy(x[tr][core.ids], y[tr][core.ids], x[te], y[te], core.weights))
    assert np.mean(cored) >= full - 0.05 and base.seconds > 0
    med, _ = raw_kmedoids(x, 3, iters=2)
    assert len(set(med.tolist())) == 3


# ---------------------------------------------------------------- bad input

def test_bad_input_gets_clear_errors():
    blocks, y = _toy(60)
    with pytest.raises(ConfigError, match="l=5 of m=4"):
        vfps_select(blocks, y, l=5)
    with pytest.raises(ConfigError, match="l=5 of m=4"):
        vfps_sm_select(blocks, y, l=5)
    with pytest.raises(ConfigError, match="larger than the data"):
        hacore_coreset(blocks, y, size=61)
    with pytest.raises(ConfigError, match="larger than the data"):
        raw_kmedoids_coreset(blocks, y, size=100)
    nan = [b.copy() for b in blocks]
    nan[2][3, 1] = np.nan
    for fn in (lambda: vfps_select(nan, y, 2), lambda: vfps_sm_select(nan, y, 2), lambda: psmi_values(nan, y),
               lambda: hacore_coreset(nan, y, 10), lambda: LocalParty(nan[2])):
        with pytest.raises(FeatureError, match="NaN"):
            fn()
    with pytest.raises(FeatureError, match="no columns"):
        vfps_select([blocks[0], np.zeros((60, 0))], y, 1)
    with pytest.raises(FeatureError, match="row counts"):
        psmi_values([blocks[0], blocks[1][:50]], y)
    with pytest.raises(ConfigError, match="more than k"):
        vfps_sm_select(blocks, np.r_[np.zeros(58), [1, 1]], 1, k=5)
    with pytest.raises(ConfigError, match="k must be"):
        fagin_knn([LocalParty(blocks[0])], k=60)
    with pytest.raises(ConfigError, match="per_stratum"):
        psmi_values(blocks, y, per_stratum=3)
    with pytest.raises(ConfigError, match="objective"):
        vfps_sm_select(blocks, y, 1, objective="coverage")
    with pytest.raises(ConfigError, match="method"):
        select_with_parties(blocks, y, 1, method="shapley")
    with pytest.raises(ConfigError, match="key_bits"):
        select_with_parties(blocks, y, 1, backend="thread", aggregate=object())
    with pytest.raises(ConfigError, match="key_bits"):
        select_with_parties(blocks, y, 1, backend="thread", key_bits=512)
