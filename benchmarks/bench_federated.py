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
4. BlindFL: the encrypted source layer's step time against the plaintext layer's (2048-bit keys).
"""
from __future__ import annotations

import argparse
import os
import threading
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


def _rounds_to(curve, target):
    for point in curve:
        if point["val_auc"] >= target - 1e-12:
            return point
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--bound", type=float, default=4.0, help="sumKL bound for ProjPert and Marvell")
    parser.add_argument("--max-rows", type=int, default=0)
    parser.add_argument("--backend", default="thread", choices=("thread", "process"))
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
        print(f"\n== label leakage (sumKL bound {args.bound:g}) ==")
        print(f"{'defense':<14}{'test AUC':>10}{'norm AUC':>10}{'dir AUC':>10}{'defense/step':>14}")
        for defense in ("none", "max-norm", "marvell", "projpert-iso", "projpert-opt"):
            bound = args.bound if defense in ("marvell", "projpert-iso", "projpert-opt") else None
            cfg = FederatedConfig(**base, defense=defense, sumkl_bound=bound, attack=True)
            r = train_federated(train, val, test, split, cfg, backend=args.backend)
            a = r["attack"][1]
            print(f"{defense:<14}{r['test_auc']:>10.4f}{a['norm_auc']:>10.3f}{a['direction_auc']:>10.3f}"
                  f"{100 * r['defense_seconds'] / r['step_seconds']:>13.1f}%")

    if "rake" not in args.skip:
        print("\n== Rake (host: dense + half the categoricals, bottom MLP [64]; server knows 10% of train) ==")
        half = len(cats) // 2
        rsplit = FieldSplit({"guest": cats[:half], "host": dense + cats[half:]})
        aux = len(train) // 10
        for rake in (False, True):
            cfg = FederatedConfig(**base, bottom_hidden=[64], rake=rake, rake_weight=1.0, observe=aux)
            r = train_federated(train, val, test, rsplit, cfg, backend=args.backend)
            host_train, host_test = rsplit.views(train)[1], rsplit.views(test)[1]
            seen = r["observed"][1]
            attack = rake_attack(host_train.rows(np.arange(aux)), seen["aux"], host_test, seen["test"], 8, [64],
                                 epochs=30)
            print(f"rake={str(rake):<6} test AUC {r['test_auc']:.4f}  surrogate error {attack['surrogate_error']:.3f}"
                  f"  reconstruction error {attack['reconstruction_error']:.3f}")

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
        _blindfl_overhead()


def _blindfl_overhead(rows: int = 64, k: int = 4, key_bits: int = 2048) -> None:
    from sgl.federated.blindfl import BlindSourceFeatureSide, BlindSourceLabelSide
    from sgl.federated.channel import LocalChannel

    print(f"\n== BlindFL source layer: 13 dense columns -> 13 x {k}, {rows} rows per step, {key_bits}-bit keys ==")
    rng = np.random.default_rng(0)
    idx = np.tile(np.arange(13), (rows, 1))
    coef = rng.normal(size=(rows, 13))
    a, b = LocalChannel.pair(timeout=600)
    box = {}

    def feature_side():
        layer = BlindSourceFeatureSide(a, peer=1, num_rows=13, embed_dim=k, seed=0)
        layer.forward(idx, coef)
        layer.backward(0.01)

    t = threading.Thread(target=feature_side)
    t.start()
    label = BlindSourceLabelSide(b, peer=0, num_rows=13, embed_dim=k, key_bits=key_bits, seed=1)
    start = time.perf_counter()
    z = label.forward()
    label.backward(torch.ones_like(z), 0.01)
    t.join()
    secure = time.perf_counter() - start
    weight = torch.randn(13, k, requires_grad=True)
    x = torch.as_tensor(coef, dtype=torch.float32)
    start = time.perf_counter()
    for _ in range(100):
        out = x[:, :, None] * weight[None]
        out.sum().backward()
    plain = (time.perf_counter() - start) / 100
    print(f"encrypted step {secure:.2f} s, plaintext step {plain * 1e3:.3f} ms: overhead {secure / plain:,.0f}x; "
          f"bytes {a.meter.bytes_sent + b.meter.bytes_sent:,} vs plaintext {2 * rows * 13 * k * 4:,}")


if __name__ == "__main__":
    main()
