"""Out-of-core training: bytes read from storage, epoch time and accuracy for naive/LRU,
Ginex-like and OUTRE at the same memory budget, in one run.

Two parts:
1. a synthetic graph written to disk (default 2M nodes, avg. degree ~10, 128 float32
   features = 1 GB, far above the 256 MB budget): per-epoch bytes/requests read from the
   store, epoch time and (sampled) test accuracy of every method;
2. Cora written to disk (if ``--cora-root`` is given or ../shared/datasets exists): test
   accuracy over seeds (validation-selected epoch, exact full-neighbour evaluation) and bytes
   per epoch at a budget below Cora's 15.5 MB of features.

The synthetic graph has community structure (the locality OUTRE's partitions exploit, as in
real citation/product graphs): nodes are split into communities of ``--community`` nodes with
shuffled ids; each node draws ``deg/2`` neighbours, a fraction ``--intra`` inside its
community; labels = community mod 10; features = class centroid + Gaussian noise. The store
is built once under ``--workdir`` and reused.

    python benchmarks/bench_outofcore.py                                   # full run
    python benchmarks/bench_outofcore.py --nodes 200000 --budget 32MB      # quick look
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgl.samplers import StoreWriter, open_store, write_store  # noqa: E402
from sgl.samplers.outofcore import OutOfCoreConfig, OutOfCoreTrainer  # noqa: E402

METHODS = ("lru", "ginex", "outre")
#: ablation rows: OUTRE's partition batches and neighbour cache without the embedding cache
VARIANTS = {"outre-noemb": {"method": "outre", "embedding_cache": False}}


def _method(name: str) -> dict:
    return VARIANTS.get(name, {"method": name})


def _runs(methods, staleness_values):
    """(row name, method, staleness): OUTRE once per staleness bound, every other method once."""
    runs = []
    for method in methods:
        sweep = _method(method) == {"method": "outre"} and len(staleness_values) > 1
        values = staleness_values if sweep else [staleness_values[-1]]
        runs.extend((f"{method}(s={v})" if sweep else method, method, v) for v in values)
    return runs


def build_synthetic(path: Path, nodes: int, features: int, degree: int, community: int, intra: float,
                    signal: float = 0.1, seed: int = 0) -> Path:
    if (path / "manifest.json").exists():
        return path
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    perm = rng.permutation(nodes)  # node id -> position; communities are contiguous positions
    comm_of_pos = np.arange(nodes) // community
    comm = np.empty(nodes, dtype=np.int64)
    comm[perm] = comm_of_pos
    half = degree // 2
    src = np.repeat(np.arange(nodes, dtype=np.int64), half)
    inside = rng.random(src.size) < intra
    pos_src = perm[src]  # position of the source; pick a partner position in the same community
    base = (pos_src // community) * community
    size = np.minimum(community, nodes - base)
    partner_pos = np.where(inside, base + (rng.random(src.size) * size).astype(np.int64),
                           rng.integers(0, nodes, src.size))
    inv = np.empty(nodes, dtype=np.int64)
    inv[perm] = np.arange(nodes)
    dst = inv[partner_pos]
    del partner_pos, pos_src, base, size, inside
    keep = src != dst
    src, dst = src[keep], dst[keep]
    import scipy.sparse as sp

    a = sp.coo_matrix((np.ones(src.size, dtype=np.int8), (dst, src)), shape=(nodes, nodes)).tocsr()
    a = (a + a.T).tocsr()  # undirected; duplicates merged
    a.sort_indices()
    labels = comm % 10
    train = np.zeros(nodes, dtype=bool)
    val = np.zeros(nodes, dtype=bool)
    test = np.zeros(nodes, dtype=bool)
    order = rng.permutation(nodes)
    n_train, n_val, n_test = nodes // 100, nodes // 200, nodes // 100
    train[order[:n_train]] = True
    val[order[n_train:n_train + n_val]] = True
    test[order[n_train + n_val:n_train + n_val + n_test]] = True
    centroids = rng.normal(0.0, 1.0, size=(10, features)).astype(np.float32) * signal
    with StoreWriter(path, nodes, int(a.nnz), features) as writer:
        writer.indptr[:] = a.indptr
        writer.indices[:] = a.indices
        chunk = 1 << 17
        for s in range(0, nodes, chunk):
            e = min(nodes, s + chunk)
            noise = rng.standard_normal((e - s, features), dtype=np.float32)
            writer.features[s:e] = centroids[labels[s:e]] + noise  # features alone are weak
        writer.add_node_array("labels", labels, "int64")
        writer.add_node_array("train_mask", train, "bool")
        writer.add_node_array("val_mask", val, "bool")
        writer.add_node_array("test_mask", test, "bool")
        writer.finalize()
    print(f"built synthetic store {path}: {nodes:,} nodes, {a.nnz:,} edges, {features} float32 features "
          f"({nodes * features * 4 / 2**30:.2f} GiB) in {time.perf_counter() - start:.1f} s", flush=True)
    return path


def run_synthetic(args) -> dict:
    path = build_synthetic(Path(args.workdir) / f"synthetic_{args.nodes}_{args.features}_{args.signal}", args.nodes,
                           args.features, args.degree, args.community, args.intra, args.signal)
    rows = {}
    for name, method, staleness in _runs(args.methods, args.staleness):
        store = open_store(path, verify="size")
        cfg = OutOfCoreConfig(**_method(method), fanouts=args.fanouts, batch_size=args.batch_size,
                              memory_budget=args.budget, hidden=args.hidden, seed=0, staleness=staleness)
        t0 = time.perf_counter()
        trainer = OutOfCoreTrainer(store, cfg)
        prep_time = time.perf_counter() - t0
        epochs = [trainer.train_epoch() for _ in range(args.epochs)]
        acc = trainer.evaluate("test", max_nodes=args.eval_nodes)
        last = epochs[-1]
        rows[name] = {"bytes_per_epoch": last["bytes_read"], "requests_per_epoch": last["requests"],
                        "epoch_time_s": last["time_s"], "test_acc": acc, "prep_time_s": prep_time,
                        "prep_bytes": trainer.prep["bytes_read"], "feature_hit_rate": last["feature_hit_rate"],
                        "peak_budget_bytes": last["peak_budget_bytes"], "by_kind": last["by_kind"],
                        "all_epochs_bytes": [e["bytes_read"] for e in epochs],
                        "prep": {k: v for k, v in trainer.prep.items() if not isinstance(v, (list, dict))}}
        print(f"  {name:15s} bytes/epoch {last['bytes_read'] / 2**20:9.1f} MiB  requests {last['requests']:>9,}  "
              f"epoch {last['time_s']:6.1f} s  test acc {100 * acc:5.1f}  hit rate {last['feature_hit_rate']:.2f}  "
              f"peak budget use {last['peak_budget_bytes'] / 2**20:.0f} MiB  (prep {prep_time:.1f} s)", flush=True)
    return rows


def run_cora(args) -> dict:
    import sgl.datasets

    graph = sgl.datasets.load("cora", root=args.cora_root)
    path = Path(args.workdir) / "cora_store"
    if not (path / "manifest.json").exists():
        write_store(graph, path)
    rows = {}
    full = [int(graph.degree().max())] * len(args.fanouts)
    for name, method, staleness in _runs(args.methods, args.cora_staleness):
        accs, bytes_ = [], []
        for seed in range(args.cora_seeds):
            store = open_store(path)
            cfg = OutOfCoreConfig(**_method(method), fanouts=args.fanouts, batch_size=args.cora_batch_size,
                                  memory_budget=args.cora_budget, hidden=64, seed=seed, staleness=staleness,
                                  group_size=args.cora_group_size, epochs=args.cora_epochs)
            record = OutOfCoreTrainer(store, cfg).fit(eval_fanouts=full)  # exact (all-neighbour) evaluation
            accs.append(record["test_acc"])
            bytes_.append(record["bytes_per_epoch"])
        rows[name] = {"test_acc_mean": float(np.mean(accs)),
                      "test_acc_std": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0,
                      "test_accs": accs, "bytes_per_epoch": float(np.mean(bytes_)), "staleness": staleness}
        print(f"  {name:15s} test acc {100 * np.mean(accs):5.1f} ± {100 * rows[name]['test_acc_std']:.1f} "
              f"({len(accs)} seeds)  bytes/epoch {np.mean(bytes_) / 2**20:7.2f} MiB", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--degree", type=int, default=10)
    parser.add_argument("--community", type=int, default=1000)
    parser.add_argument("--intra", type=float, default=0.8)
    parser.add_argument("--signal", type=float, default=0.1, help="scale of the class centroids (noise std 1)")
    parser.add_argument("--budget", default="256MB")
    parser.add_argument("--fanouts", default="10,10")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--staleness", default="100", help="OUTRE staleness bound(s), comma-separated")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--eval-nodes", type=int, default=5000)
    parser.add_argument("--workdir", default="/tmp/sgl_bench_outofcore")
    parser.add_argument("--cora-root", default=None)
    parser.add_argument("--cora-budget", default="4MB")
    parser.add_argument("--cora-batch-size", type=int, default=16)
    parser.add_argument("--cora-group-size", type=int, default=2)
    parser.add_argument("--cora-epochs", type=int, default=40)
    parser.add_argument("--cora-seeds", type=int, default=5)
    # OUTRE's default bound (100 iterations) is ~8% of a papers100M epoch (~1,200 batches); Cora
    # has ~9 batches per epoch, so a bound of the same epoch fraction is below one iteration
    parser.add_argument("--cora-staleness", default="2,5,20,100",
                        help="OUTRE staleness bounds to run on Cora (comma-separated)")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="subset of lru,ginex,outre and the ablation outre-noemb")
    parser.add_argument("--json", help="write all figures here")
    args = parser.parse_args()
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    args.methods = [m for m in args.methods.split(",") if m]
    args.cora_staleness = [int(v) for v in str(args.cora_staleness).split(",") if v]
    args.staleness = [int(v) for v in str(args.staleness).split(",") if v]
    torch.set_num_threads(args.threads)
    if args.cora_root is None:
        shared = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "planetoid"
        args.cora_root = str(shared) if shared.exists() else None
    out = {"args": {k: v for k, v in vars(args).items()}}
    if not args.skip_synthetic:
        print(f"synthetic graph: {args.nodes:,} nodes, {args.features} features, budget {args.budget}, "
              f"fan-outs {args.fanouts}, batch {args.batch_size}, staleness {args.staleness}, {args.epochs} epochs "
              f"(figures from the last epoch)", flush=True)
        syn = run_synthetic(args)
        out["synthetic"] = syn
        if "ginex" in syn:
            g = syn["ginex"]
            for method in [m for m in syn if m != "ginex"]:
                ratio = syn[method]["bytes_per_epoch"] / g["bytes_per_epoch"]
                print(f"  {method}: bytes / ginex = {ratio:.3f} ({100 * abs(1 - ratio):.1f}% "
                      f"{'fewer' if ratio < 1 else 'more'}), accuracy - ginex = "
                      f"{100 * (syn[method]['test_acc'] - g['test_acc']):+.1f} points, epoch time / ginex = "
                      f"{syn[method]['epoch_time_s'] / g['epoch_time_s']:.2f}")
    if args.cora_root and args.cora_seeds > 0:
        print(f"cora on disk: budget {args.cora_budget}, batch {args.cora_batch_size}, {args.cora_epochs} epochs "
              f"(validation-selected), {args.cora_seeds} seeds, OUTRE staleness {args.cora_staleness}", flush=True)
        cora = run_cora(args)
        out["cora"] = cora
        if "ginex" in cora:
            for name, row in cora.items():
                if name.startswith("outre"):
                    print(f"  {name}: accuracy - ginex = "
                          f"{100 * (row['test_acc_mean'] - cora['ginex']['test_acc_mean']):+.1f} points; bytes / ginex "
                          f"= {row['bytes_per_epoch'] / cora['ginex']['bytes_per_epoch']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
