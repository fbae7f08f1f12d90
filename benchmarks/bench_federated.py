"""Vertical federated CTR training (sgl.federated) on the Criteo sample, WDL, 2 parties.

    SGL_TEST_DATA=../shared/datasets .venv/bin/python benchmarks/bench_federated.py [--epochs 2] [--bound 4]

Sections (every number below is measured by this run; parties run as threads over the same
channel protocol and byte counts as processes, ``--backend process`` for one process per party):

1. label leakage: none / max-norm / Marvell / ProjPert-iso / ProjPert-opt at one sumKL bound:
   test AUC, norm and direction attack AUC (max(AUC, 1-AUC), per batch, mean), defense share of
   step time;
2. Rake: surrogate error and dense-feature reconstruction error of a curious server, with and
   without Rake's two bottom models, and the task AUC;
3. CELU-VFL: rounds and modelled wall time (100 Mbit/s, 10 ms) to reach vanilla's best
   validation AUC;
4. BlindFL: WDL trained with a BlindFL source layer at the passive party against plaintext split
   learning with the same layer, seeds and rows: test AUC and the cryptographic overhead factor.
   Paillier costs milliseconds per operation, so this section uses 1,024 training rows, 512
   validation/test rows, 1024-bit keys and one epoch of batch 128 (``--blindfl-rows`` etc.).
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from sgl.datasets.ctr import load_criteo, make_synthetic_ctr
from sgl.federated import FederatedConfig, FieldSplit, rake_attack, train_federated


def _data(max_rows):
    root = os.environ.get("SGL_TEST_DATA")
    if root and (Path(root) / "criteo_het_sampled").is_dir():
        data, name = load_criteo(Path(root) / "criteo_het_sampled"), "criteo_het_sampled (8,192 rows)"
    elif root and (Path(root) / "criteo_deepctr_sample").is_dir():
        data, name = load_criteo(Path(root) / "criteo_deepctr_sample", progress=False), "criteo_deepctr_sample"
    else:
        data, name = make_synthetic_ctr(8192, [200] * 26, num_dense=13, seed=0), "synthetic (no SGL_TEST_DATA)"
    if max_rows:
        data = data.subset(np.arange(min(max_rows, len(data))))
    return data, name


def _noise_share(batch: int, width: int, repeats: int = 40) -> None:
    """How much of ProjPert-iso's cost is the Gaussian draw every noise defense pays (interleaved timing)."""
    from sgl.federated.defenses import perturb

    gen = torch.Generator().manual_seed(0)
    g = torch.randn(batch, width, generator=gen) * 1e-3
    y = (torch.rand(batch, generator=gen) < 0.25).float()
    full = draw = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        perturb("projpert-iso", g, y, bound=1.0, generator=gen)
        t1 = time.perf_counter()
        torch.randn(batch, width, generator=gen)
        t2 = time.perf_counter()
        full, draw = full + t1 - t0, draw + t2 - t1
    print(f"ProjPert-iso on [{batch}, {width}]: {1e3 * full / repeats:.2f} ms per batch, of which the "
          f"[{batch}, {width}] Gaussian draw {1e3 * draw / repeats:.2f} ms ({100 * draw / full:.0f}%); "
          f"moments + closed-form targets + scaling {1e3 * (full - draw) / repeats:.2f} ms")


def _rounds_to(curve, target):
    for point in curve:
        if point["val_auc"] >= target - 1e-12:
            return point
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--max-rows", type=int, default=0)
    parser.add_argument("--backend", default="thread", choices=("thread", "process"))
    parser.add_argument("--defense-batch", type=int, default=1024, help="batch of the label-leakage runs (FDL: 1024)")
    parser.add_argument("--defense-epochs", type=int, default=5, help="epochs of the label-leakage runs (FDL: 5)")
    parser.add_argument("--defense-embed", type=int, default=8)
    parser.add_argument("--defense-hidden", type=int, nargs="+", default=[64])
    parser.add_argument("--defense-bottom", type=int, nargs="*", default=[])
    parser.add_argument("--defenses", nargs="+", default=["none", "max-norm", "marvell", "projpert-iso", "projpert-opt"])
    parser.add_argument("--bounds", type=float, nargs="+", default=[4.0, 1.0, 0.25],
                        help="sumKL bounds, each applied to Marvell and both ProjPerts")
    parser.add_argument("--rake-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--key-bits", type=int, default=1024, help="BlindFL Paillier key size (>= 1024)")
    parser.add_argument("--blindfl-rows", type=int, default=1024, help="BlindFL training rows (Paillier is slow)")
    parser.add_argument("--blindfl-eval", type=int, default=512, help="BlindFL validation and test rows")
    parser.add_argument("--blindfl-lr", type=float, default=0.5, help="SGD learning rate of the source layer")
    parser.add_argument("--skip", nargs="*", default=[], choices=("defenses", "rake", "celu", "blindfl"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    data, name = _data(args.max_rows)
    train, val, test = data.split((0.8, 0.1, 0.1), seed=0)
    dense, cats = list(data.dense_names), list(data.field_names)
    split = FieldSplit({"guest": dense, "host": cats})
    base = dict(model="wdl", embed_dim=8, hidden=[64], batch_size=256, epochs=args.epochs, lr=1e-3, seed=0)
    print(f"data: {name}; train/val/test {len(train)}/{len(val)}/{len(test)}; guest = {len(dense)} dense, "
          f"host = {len(cats)} categorical; WDL; {args.epochs} epochs of batch 256")

    if "defenses" not in args.skip:
        dbase = dict(base, batch_size=args.defense_batch, epochs=args.defense_epochs, embed_dim=args.defense_embed,
                     hidden=args.defense_hidden, bottom_hidden=args.defense_bottom)
        print(f"\n== label leakage (WDL, embed {args.defense_embed}, top MLP {args.defense_hidden}, host bottom MLP "
              f"{args.defense_bottom}, batch {args.defense_batch}, {args.defense_epochs} epochs; attack AUC = "
              "mean per-batch max(AUC, 1-AUC); 'chance' = the same for random scores; 'oriented' = plain AUC "
              "with the attack's a-priori orientation) ==")
        print(f"{'defense':<14}{'bound':>6}{'test AUC':>10}{'norm':>8}{'dir':>8}{'chance':>8}{'norm or.':>10}"
              f"{'dir or.':>9}{'def/step':>10}{'step ms':>9}")
        runs = [(d, None) for d in ("none", "max-norm") if d in args.defenses] + \
            [(d, b) for b in args.bounds for d in ("marvell", "projpert-iso", "projpert-opt") if d in args.defenses]
        for defense, bound in runs:
            cfg = FederatedConfig(**dbase, defense=defense, sumkl_bound=bound, attack=True)
            r = train_federated(train, val, test, split, cfg, backend=args.backend)
            a = r["attack"][1]
            print(f"{defense:<14}{'-' if bound is None else f'{bound:g}':>6}{r['test_auc']:>10.4f}"
                  f"{a['norm_auc']:>8.3f}{a['direction_auc']:>8.3f}{a['chance_auc']:>8.3f}"
                  f"{a['norm_auc_oriented']:>10.3f}{a['direction_auc_oriented']:>9.3f}"
                  f"{100 * r['defense_seconds'] / r['step_seconds']:>9.1f}%"
                  f"{1e3 * r['step_seconds'] / len(r['losses']):>9.1f}")
        _noise_share(args.defense_batch, len(cats) * args.defense_embed)

    if "rake" not in args.skip:
        print(f"\n== Rake (host: dense + half the categoricals, bottom MLP [64]; server knows 10% of train; "
              f"seeds {args.rake_seeds}: model init, batch order, coins, surrogate) ==")
        half = len(cats) // 2
        rsplit = FieldSplit({"guest": cats[:half], "host": dense + cats[half:]})
        aux = len(train) // 10
        host_train, host_test = rsplit.views(train)[1], rsplit.views(test)[1]
        table = {False: [], True: []}
        for seed in args.rake_seeds:
            for rake in (False, True):
                cfg = FederatedConfig(**dict(base, seed=seed), bottom_hidden=[64], rake=rake, rake_weight=1.0,
                                      observe=aux)
                r = train_federated(train, val, test, rsplit, cfg, backend=args.backend)
                seen = r["observed"][1]
                attack = rake_attack(host_train.rows(np.arange(aux)), seen["aux"], host_test, seen["test"], 8, [64],
                                     epochs=30, seed=seed)
                table[rake].append((r["test_auc"], attack["surrogate_error"], attack["reconstruction_error"]))
                print(f"seed {seed} rake={str(rake):<6} test AUC {r['test_auc']:.4f}  surrogate error "
                      f"{attack['surrogate_error']:.3f}  reconstruction error {attack['reconstruction_error']:.3f}")
        off, on = np.array(table[False]), np.array(table[True])
        drop = off[:, 0] - on[:, 0]
        fmt = lambda v: f"{v.mean():.4f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.4f}"  # noqa: E731
        print(f"mean ± std over {len(drop)} seeds: test AUC {fmt(off[:, 0])} -> {fmt(on[:, 0])}, drop {fmt(drop)} "
              f"(target <= 0.005); surrogate error {fmt(off[:, 1])} -> {fmt(on[:, 1])}; reconstruction error "
              f"{fmt(off[:, 2])} -> {fmt(on[:, 2])}")

    if "celu" not in args.skip:
        print("\n== CELU-VFL (100 Mbit/s, 10 ms; validation every 4 rounds) ==")
        curves = {}
        for steps in (0, 4):
            cfg = FederatedConfig(**base, local_steps=steps, eval_every=4, bandwidth_mbps=100, latency_ms=10)
            curves[steps] = train_federated(train, val, test, split, cfg, backend=args.backend)
        target = max(p["val_auc"] for p in curves[0]["curve"])
        for steps, r in curves.items():
            hit = _rounds_to(r["curve"], target)
            when = (f"round {hit['round']}, modelled {hit['link_seconds'] + hit['compute_seconds']:.2f} s "
                    f"(link {hit['link_seconds']:.2f} + compute {hit['compute_seconds']:.2f})") if hit else "not reached"
            print(f"local_steps={steps}: best val AUC {max(p['val_auc'] for p in r['curve']):.4f}; reaches vanilla's "
                  f"best {target:.4f} at {when}; test AUC {r['test_auc']:.4f}")
        v, c = _rounds_to(curves[0]["curve"], target), _rounds_to(curves[4]["curve"], target)
        if v and c:
            print(f"round ratio vanilla/CELU: {v['round'] / c['round']:.2f}x")

    if "blindfl" not in args.skip:
        _blindfl(train, val, test, args)


def _blindfl(train, val, test, args) -> None:
    """WDL whose passive bottom is a BlindFL source layer, against plaintext split learning with the
    same layer (SGD), seeds, batches and rows: test AUC and the cryptographic overhead factor."""
    n_train, n_eval = args.blindfl_rows, args.blindfl_eval
    train, val, test = (train.subset(np.arange(min(n_train, len(train)))), val.subset(np.arange(min(n_eval, len(val)))),
                        test.subset(np.arange(min(n_eval, len(test)))))
    host = ["I1", "I2", "C9"]  # 2 MatMul columns + 1 Embed field (4 ids): the layer has 6 weight rows
    split = FieldSplit({"guest": [c for c in list(train.dense_names) + list(train.field_names) if c not in host],
                        "host": host})
    cfg = dict(model="wdl", embed_dim=4, hidden=[64], batch_size=128, epochs=1, lr=1e-3, seed=0,
               passive_optimizer="sgd", passive_lr=args.blindfl_lr, timeout=600)
    print(f"\n== BlindFL (WDL, host = {host} through the source layer, {args.key_bits}-bit Paillier, "
          f"{len(train)} train / {len(val)} val / {len(test)} test rows, batch 128, 1 epoch; threads) ==")
    runs = {}
    for blind in (False, True):
        extra = dict(blindfl=True, key_bits=args.key_bits) if blind else {}
        start = time.perf_counter()
        r = train_federated(train, val, test, split, FederatedConfig(**cfg, **extra), backend="thread")
        r["wall"] = time.perf_counter() - start
        runs[blind] = r
        steps = len(r["losses"])
        print(f"{'BlindFL' if blind else 'plaintext':<10} test AUC {r['test_auc']:.4f}  final loss {r['losses'][-1]:.5f}"
              f"  step {1e3 * r['step_seconds'] / steps:,.1f} ms  training bytes {r['traffic']['bytes_received'] + r['traffic']['bytes_sent']:,}"
              f"  run wall {r['wall']:.1f} s")
    p, b = runs[False], runs[True]
    print(f"test AUC gap |BlindFL - plaintext| = {abs(b['test_auc'] - p['test_auc']):.4f} (target <= 0.005); "
          f"max |loss gap| {np.max(np.abs(np.subtract(b['losses'], p['losses']))):.2e}")
    bytes_ratio = (b['traffic']['bytes_received'] + b['traffic']['bytes_sent']) / \
        (p['traffic']['bytes_received'] + p['traffic']['bytes_sent'])
    print(f"cryptographic overhead: {b['step_seconds'] / p['step_seconds']:,.0f}x training step time, "
          f"{bytes_ratio:,.0f}x training bytes, {b['wall'] / p['wall']:,.0f}x run wall time (incl. key generation "
          "and secure evaluation)")


if __name__ == "__main__":
    main()
