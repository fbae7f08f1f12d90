"""Out-of-core training: bytes read from storage, epoch time and accuracy for naive/LRU,
Ginex-like and OUTRE at the same memory budget, in one run.

Two parts:
1. a synthetic graph written to disk (default 2M nodes, avg. degree ~10, 128 float32
   features = 1 GB, far above the 256 MB budget; 2 % training nodes and batches of 200, so an
   epoch is 200 batches and OUTRE's staleness bound of 100 iterations is half an epoch): per-epoch
   bytes/requests read from the store, epoch time, (sampled) test accuracy of every method, and
   how many cached embeddings OUTRE pulled, pushed and recomputed (refreshed) per epoch;
2. Cora written to disk (if ``--cora-root`` is given or ../shared/datasets exists): test
   accuracy over seeds (validation-selected epoch, exact full-neighbour evaluation) and bytes
   per epoch at a budget below Cora's 15.5 MB of features, for LRU, Ginex-like and a grid of
   OUTRE settings (``--cora-candidates``). The OUTRE setting reported against the target is
   picked *without test accuracy*: among the candidates that read at most ``1 - --cora-saving``
   of Ginex-like's bytes, the one with the best mean validation accuracy.

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
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgl.samplers import StoreWriter, open_store, write_store  # noqa: E402
from sgl.samplers.outofcore import METHODS  # noqa: E402
from sgl.tasks import OutOfCoreConfig, OutOfCoreTrainer  # noqa: E402

#: ablation rows: OUTRE's partition batches and neighbour cache without the embedding cache;
#: OUTRE with each partition group's CSR loaded up front (instead of neighbour lists on demand)
VARIANTS = {"outre-noemb": {"method": "outre", "embedding_cache": False},
            "outre-gcsr": {"method": "outre", "group_csr": True},
            # OUTRE's batches and embedding cache on Ginex-like's feature cache (same training as outre)
            "outre-belady": {"method": "outre", "feature_cache": "belady"}}
#: OUTRE settings tried on Cora: staleness bound (iterations) x share of first-hop nodes the
#: embedding cache may hold (``embedding_top``); profiled over 5 epochs (Cora has ~9 batches each)
CORA_CANDIDATES = ";".join(f"staleness={s},embedding_top={t},profile_epochs=5"
                           for s in (20, 40, 100) for t in (1.0, 0.5, 0.3, 0.15))


def _method(name: str) -> dict:
    return VARIANTS.get(name, {"method": name})


def _runs(methods, staleness_values):
    """(row name, method, staleness): OUTRE once per staleness bound, every other method once."""
    runs = []
    for method in methods:
        sweep = method in ("outre", "outre-belady") and len(staleness_values) > 1
        values = staleness_values if sweep else [staleness_values[-1]]
        runs.extend((f"{method}(s={v})" if sweep else method, method, v) for v in values)
    return runs


def parse_candidates(text: str) -> list:
    """``"staleness=20,embedding_top=0.3;staleness=40"`` -> a list of OutOfCoreConfig overrides."""
    out = []
    for chunk in (c for c in text.split(";") if c.strip()):
        item = {}
        for pair in chunk.split(","):
            key, _, value = pair.partition("=")
            value = value.strip()
            item[key.strip()] = {"true": True, "false": False}.get(value.lower(), None)
            if item[key.strip()] is None:
                try:
                    item[key.strip()] = float(value) if any(ch in value for ch in ".e") else int(value)
                except ValueError:
                    item[key.strip()] = value  # e.g. feature_cache=belady
        out.append(item)
    return out


def _name(overrides: dict) -> str:
    short = {"staleness": "s", "embedding_top": "top", "profile_epochs": "prof", "group_csr": "gcsr"}
    return "outre(" + ",".join(f"{short.get(k, k)}={v}" for k, v in overrides.items()) + ")"


def build_synthetic(path: Path, nodes: int, features: int, degree: int, community: int, intra: float,
                    signal: float = 0.1, seed: int = 0, train_fraction: float = 0.01,
                    powerlaw: float = 0.0) -> Path:
    if (path / "manifest.json").exists():
        return path
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    perm = rng.permutation(nodes)  # node id -> position; communities are contiguous positions
    comm_of_pos = np.arange(nodes) // community
    comm = np.empty(nodes, dtype=np.int64)
    comm[perm] = comm_of_pos
    half = degree // 2
    if powerlaw > 0:
        # Chung-Lu style heavy tail: node weights ~ Pareto(powerlaw - 1) scaled to mean `degree`,
        # each node draws ~weight/2 edges and partners are picked in proportion to weight
        weight = rng.pareto(powerlaw - 1.0, nodes) + 1.0
        weight = np.minimum(weight * degree / weight.mean(), nodes ** 0.5 * degree)
        stubs = rng.poisson(weight / 2.0)
        src = np.repeat(np.arange(nodes, dtype=np.int64), stubs)
    else:
        weight = None
        src = np.repeat(np.arange(nodes, dtype=np.int64), half)
    inside = rng.random(src.size) < intra
    pos_src = perm[src]  # position of the source; pick a partner position in the same community
    base = (pos_src // community) * community
    size = np.minimum(community, nodes - base)
    if weight is None:
        partner_pos = np.where(inside, base + (rng.random(src.size) * size).astype(np.int64),
                               rng.integers(0, nodes, src.size))
    else:
        w_pos = np.empty(nodes)
        w_pos[perm] = weight  # weights in position order: communities are contiguous positions
        cum = np.concatenate([[0.0], np.cumsum(w_pos)])
        lo, hi = cum[base], cum[base + size]
        target = np.where(inside, lo + rng.random(src.size) * (hi - lo), rng.random(src.size) * cum[-1])
        partner_pos = np.minimum(np.searchsorted(cum, target, side="right") - 1, nodes - 1)
        del w_pos, cum, lo, hi, target
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
    n_train, n_val, n_test = int(nodes * train_fraction), nodes // 200, nodes // 100
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
    tag = "" if args.train_fraction == 0.01 else f"_train{args.train_fraction}"
    tag += f"_powerlaw{args.powerlaw}" if args.powerlaw > 0 else ""
    # a store is reused by name: every generator setting that differs from the default is in it
    for name, default in (("degree", 10), ("community", 1000), ("intra", 0.8)):
        if getattr(args, name) != default:
            tag += f"_{name}{getattr(args, name)}"
    path = build_synthetic(Path(args.workdir) / f"synthetic_{args.nodes}_{args.features}_{args.signal}{tag}",
                           args.nodes, args.features, args.degree, args.community, args.intra, args.signal,
                           train_fraction=args.train_fraction, powerlaw=args.powerlaw)
    rows = {}
    for name, method, staleness in _runs(args.methods, args.staleness):
        store = open_store(path, verify="size")
        cfg = OutOfCoreConfig.from_flat(**_method(method), fanouts=args.fanouts, batch_size=args.batch_size,
                                        memory_budget=args.budget, hidden=args.hidden, seed=0, staleness=staleness,
                                        profile_epochs=args.profile_epochs, partition_passes=args.partition_passes,
                                        reset_caches=args.reset_caches, group_size=args.group_size,
                                        num_parts=args.num_parts)
        t0 = time.perf_counter()
        trainer = OutOfCoreTrainer(store, cfg)
        prep_time = time.perf_counter() - t0
        epochs = [trainer.train_epoch(io_only=args.io_only) for _ in range(args.epochs)]
        acc = float("nan") if args.io_only else trainer.evaluate("test", max_nodes=args.eval_nodes)
        last = epochs[-1]
        rows[name] = {"bytes_per_epoch": last["bytes_read"], "requests_per_epoch": last["requests"],
                      "epoch_time_s": last["time_s"], "test_acc": acc, "prep_time_s": prep_time,
                      "prep_bytes": trainer.prep["bytes_read"], "feature_hit_rate": last["feature_hit_rate"],
                      "peak_budget_bytes": last["peak_budget_bytes"], "by_kind": last["by_kind"],
                      "batches_per_epoch": last["batches"], "staleness": staleness,
                      "embedding_pulls": last["embedding_pulls"], "embedding_pushes": last["embedding_pushes"],
                      "embedding_refreshes": last["embedding_refreshes"],
                      "all_epochs": [{k: v for k, v in e.items() if k != "by_kind"} for e in epochs],
                      "prep": {k: v for k, v in trainer.prep.items() if not isinstance(v, (list, dict))}}
        if "partition_inside_fraction" in trainer.prep:
            rows[name]["partition_inside_fraction"] = trainer.prep["partition_inside_fraction"]
            print(f"  {name:15s} partitions keep {100 * trainer.prep['partition_inside_fraction']:.1f} % of edges inside "
                  f"({trainer.prep['partition_time_s']:.1f} s)", flush=True)
        emb = (f"  embeddings pulled {last['embedding_pulls']:,} pushed {last['embedding_pushes']:,} "
               f"recomputed {last['embedding_refreshes']:,}" if trainer.emb_cache is not None else "")
        kinds = ", ".join(f"{k} {v['bytes'] / 2**20:.1f}" for k, v in last["by_kind"].items())
        print(f"  {name:15s} bytes/epoch {last['bytes_read'] / 2**20:9.1f} MiB  requests {last['requests']:>9,}  "
              f"epoch {last['time_s']:6.1f} s  test acc {100 * acc:5.1f}  hit rate {last['feature_hit_rate']:.2f}  "
              f"peak budget use {last['peak_budget_bytes'] / 2**20:.0f} MiB  (prep {prep_time:.1f} s){emb}  "
              f"MiB by kind: {kinds}",
              flush=True)
    return rows


def run_cora(args) -> dict:
    import sgl.datasets

    graph = sgl.datasets.load("cora", root=args.cora_root)
    path = Path(args.workdir) / "cora_store"
    if not (path / "manifest.json").exists():
        write_store(graph, path)
    full = [int(graph.degree().max())] * len(args.fanouts)
    runs = [(m, _method(m)) for m in args.methods if m != "outre"]
    if "outre" in args.methods:
        runs += [(_name(c), {"method": "outre", **c}) for c in args.cora_candidates]
    rows = {}
    for name, overrides in runs:
        accs, vals, bytes_, times = [], [], [], []
        for seed in range(args.cora_seeds):
            store = open_store(path)
            cfg = OutOfCoreConfig.from_flat(**{"fanouts": args.fanouts, "batch_size": args.cora_batch_size,
                                               "memory_budget": args.cora_budget, "hidden": 64, "seed": seed,
                                               "group_size": args.cora_group_size, "epochs": args.cora_epochs,
                                               **overrides})
            record = OutOfCoreTrainer(store, cfg).fit(eval_fanouts=full)  # exact (all-neighbour) evaluation
            accs.append(record["test_acc"])
            vals.append(record["val_acc"])
            bytes_.append(record["bytes_per_epoch"])
            times.append(record["epoch_time_s"])
        std = lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0  # noqa: E731
        rows[name] = {"overrides": overrides, "test_acc_mean": float(np.mean(accs)), "test_acc_std": std(accs),
                      "val_acc_mean": float(np.mean(vals)), "val_acc_std": std(vals), "test_accs": accs,
                      "val_accs": vals, "bytes_per_epoch": float(np.mean(bytes_)), "epoch_time_s": float(np.mean(times))}
        print(f"  {name:45s} val {100 * np.mean(vals):5.1f} ± {100 * std(vals):.1f}  test {100 * np.mean(accs):5.1f} ± "
              f"{100 * std(accs):.1f} ({len(accs)} seeds)  bytes/epoch {np.mean(bytes_) / 2**20:6.2f} MiB", flush=True)
    return rows


def select_cora(rows: dict, saving: float) -> dict:
    """The OUTRE candidate picked without test accuracy: bytes <= (1 - saving) x Ginex-like's, then the
    best mean validation accuracy (ties: fewer bytes)."""
    base = rows["ginex"]
    limit = (1.0 - saving) * base["bytes_per_epoch"]
    eligible = [n for n, r in rows.items() if n.startswith("outre(") and r["bytes_per_epoch"] <= limit]
    if not eligible:
        return {"selected": None, "rule": f"no OUTRE candidate reads <= {1 - saving:.2f}x Ginex-like's bytes"}
    pick = max(eligible, key=lambda n: (round(rows[n]["val_acc_mean"], 6), -rows[n]["bytes_per_epoch"]))
    r = rows[pick]
    return {"selected": pick, "bytes_ratio": r["bytes_per_epoch"] / base["bytes_per_epoch"],
            "val_delta_points": 100 * (r["val_acc_mean"] - base["val_acc_mean"]),
            "test_delta_points": 100 * (r["test_acc_mean"] - base["test_acc_mean"]),
            "rule": f"bytes <= {1 - saving:.2f}x Ginex-like, then best mean validation accuracy"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--degree", type=int, default=10)
    parser.add_argument("--community", type=int, default=1000)
    parser.add_argument("--intra", type=float, default=0.8)
    parser.add_argument("--powerlaw", type=float, default=0.0,
                        help="> 2: heavy-tailed degrees (Chung-Lu, degree exponent ~ this value); 0: every node "
                             "draws degree/2 edges (flat degrees)")
    parser.add_argument("--signal", type=float, default=0.1, help="scale of the class centroids (noise std 1)")
    parser.add_argument("--budget", default="256MB")
    parser.add_argument("--fanouts", default="10,10")
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--train-fraction", type=float, default=0.02, help="share of nodes that are training nodes")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--staleness", default="100", help="OUTRE staleness bound(s), comma-separated")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--profile-epochs", type=int, default=1, help="OUTRE's profiling epochs (synthetic part)")
    parser.add_argument("--partition-passes", type=int, default=3,
                        help="OUTRE's FENNEL restreaming passes at most (synthetic part; stops early when the cut stalls)")
    parser.add_argument("--group-size", type=int, default=20, help="OUTRE's partitions per group (synthetic part)")
    parser.add_argument("--num-parts", type=int, default=None,
                        help="OUTRE's partition count (synthetic part; default: a group holds about two batches)")
    parser.add_argument("--reset-caches", action="store_true",
                        help="synthetic part: restart the caches as the official codes do (Ginex refills its cache "
                             "from storage every superbatch; OUTRE empties its feature and embedding caches every epoch)")
    parser.add_argument("--eval-nodes", type=int, default=5000)
    parser.add_argument("--io-only", action="store_true",
                        help="synthetic part: replay every epoch's storage traffic without training (exact bytes and "
                             "requests, no accuracy; several times faster)")
    parser.add_argument("--workdir", default="/tmp/sgl_bench_outofcore")
    parser.add_argument("--cora-root", default=None)
    parser.add_argument("--cora-budget", default="4MB")
    parser.add_argument("--cora-batch-size", type=int, default=16)
    parser.add_argument("--cora-group-size", type=int, default=2)
    parser.add_argument("--cora-epochs", type=int, default=40)
    parser.add_argument("--cora-seeds", type=int, default=5)
    # OUTRE's default bound (100 iterations) is ~8% of a papers100M epoch (~1,200 batches); Cora
    # has ~9 batches per epoch, so a bound of the same epoch fraction is below one iteration
    parser.add_argument("--cora-candidates", default=CORA_CANDIDATES,
                        help="OUTRE settings to run on Cora: ';'-separated KEY=VALUE,... OutOfCoreConfig.from_flat overrides")
    parser.add_argument("--cora-saving", type=float, default=0.4,
                        help="byte saving vs Ginex-like an OUTRE candidate must reach to be selected")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="subset of lru,ginex,outre and the variants outre-noemb, outre-gcsr, outre-belady")
    parser.add_argument("--json", help="write all figures here")
    args = parser.parse_args()
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    args.methods = [m for m in args.methods.split(",") if m]
    args.cora_candidates = parse_candidates(args.cora_candidates)
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
                steady = ""
                if args.epochs > 3:  # epochs 1-2 are transients (empty caches, few stale embeddings)
                    mean = lambda m: np.mean([e["bytes_read"] for e in syn[m]["all_epochs"][3:]])  # noqa: E731
                    steady = f", epochs 4-{args.epochs}: {mean(method) / mean('ginex'):.3f}"
                print(f"  {method}: bytes / ginex = {ratio:.3f} ({100 * abs(1 - ratio):.1f}% "
                      f"{'fewer' if ratio < 1 else 'more'}{steady}), accuracy - ginex = "
                      f"{100 * (syn[method]['test_acc'] - g['test_acc']):+.1f} points, epoch time / ginex = "
                      f"{syn[method]['epoch_time_s'] / g['epoch_time_s']:.2f}")
    if args.cora_root and args.cora_seeds > 0:
        print(f"cora on disk: budget {args.cora_budget}, batch {args.cora_batch_size}, {args.cora_epochs} epochs "
              f"(validation-selected), {args.cora_seeds} seeds, {len(args.cora_candidates)} OUTRE settings", flush=True)
        cora = run_cora(args)
        out["cora"] = {"rows": cora}
        if "ginex" in cora:
            g = cora["ginex"]
            for name, row in cora.items():
                if name.startswith("outre"):
                    print(f"  {name}: bytes / ginex = {row['bytes_per_epoch'] / g['bytes_per_epoch']:.3f}; "
                          f"validation - ginex = {100 * (row['val_acc_mean'] - g['val_acc_mean']):+.2f} points; "
                          f"test - ginex = {100 * (row['test_acc_mean'] - g['test_acc_mean']):+.2f} points")
            choice = select_cora(cora, args.cora_saving)
            out["cora"]["selection"] = choice
            if choice["selected"] is None:
                print(f"  selection: {choice['rule']}")
            else:
                print(f"  selected ({choice['rule']}): {choice['selected']}: bytes / ginex = {choice['bytes_ratio']:.3f} "
                      f"({100 * (1 - choice['bytes_ratio']):.1f}% fewer), validation {choice['val_delta_points']:+.2f} "
                      f"points, test {choice['test_delta_points']:+.2f} points vs Ginex-like")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
