"""HET and HET-GMP embedding-traffic benchmarks (parts (b) and (c) of issue 7's bench_embeddings).

(b) HET: bytes moved between 4 workers and the parameter server vs a no-cache PS that pulls and
    pushes the *unique* keys of every batch, on synthetic Zipf CTR data; AUC of bound 10 vs bound 0.
(c) HET-GMP: remote embedding traffic vs a random sample partition + ``id mod N`` placement
    (bound 0, no mirrors), 4 workers, on the real Criteo sample (8,192 rows) and synthetic data.

Both run the 4 workers in ONE process with the in-process transport (the simulator: exact byte
counts, lock-step rounds identical to the multi-process schedule -- tests/embeddings/*_dist.py
check that bit for bit on 2 real Gloo processes).  Dense parameters are shared (= all-reduce).

    .venv/bin/python benchmarks/bench_het.py --parts b,c
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sgl.datasets.ctr import CTRData, load_criteo, make_synthetic_ctr
from sgl.embeddings.het import (
    HETConfig, HETEmbedding, LocalTransport, NoCacheEmbedding, ShardedServer, het_traffic_bound,
    steady_state_reduction,
)
from sgl.embeddings.hetgmp import (
    Bigraph, GMPConfig, PartitionConfig, partition_bigraph, random_partition, select_replicas,
    simulated_cluster,
)
from sgl.models.ctr import build_ctr_model
from sgl.tasks.ctr import roc_auc

WORKERS = 4
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


class _Table(nn.Module):
    """Read-only lookup in a final server table (evaluation without touching the caches)."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)


def _model(data: CTRData, embedding: nn.Module, dim: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return build_ctr_model("wdl", embedding, num_fields=data.num_fields, embed_dim=dim,
                           num_dense=data.num_dense, hidden=[64, 32])


def train_lockstep(workers: list, model: nn.Module, data: CTRData, rounds: list[list[np.ndarray]],
                   dense_lr: float = 1e-3) -> None:
    """Lock-step data-parallel training: every worker's forward, one backward, every worker's step.

    ``rounds[r][w]`` are worker ``w``'s sample indices in round ``r``.  Dense gradients add up over
    workers (as an all-reduce would); each worker's embedding rows get its own gradients.
    """
    ids = torch.from_numpy(data.global_ids())
    dense = torch.from_numpy(data.dense)
    labels = torch.from_numpy(data.labels)
    opt = torch.optim.Adam([p for n, p in model.named_parameters() if not n.startswith("embedding.")],
                           lr=dense_lr)
    for batch in rounds:
        loss = 0.0
        for w, idx in zip(workers, batch):
            idx = torch.from_numpy(idx)
            model.embedding = w
            loss = loss + F.binary_cross_entropy_with_logits(model(dense[idx], ids[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        for w in workers:
            w.step()
    for w in workers:
        w.flush()


def evaluate(model: nn.Module, table: torch.Tensor, data: CTRData) -> float:
    model.embedding = _Table(table)
    model.eval()
    with torch.no_grad():
        scores = model(torch.from_numpy(data.dense), torch.from_numpy(data.global_ids()))
    model.train()
    return roc_auc(scores.numpy(), data.labels)


def _shuffled_rounds(n: int, batch: int, epochs: int, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    per_round = batch * WORKERS
    out = []
    for _ in range(epochs):
        order = rng.permutation(n)
        for r in range(n // per_round):
            chunk = order[r * per_round:(r + 1) * per_round]
            out.append([chunk[w * batch:(w + 1) * batch] for w in range(WORKERS)])
    return out


def _partition_rounds(sample_part: np.ndarray, batch: int, epochs: int, seed: int) -> list[list[np.ndarray]]:
    """Each worker walks its own samples; rounds = the smallest worker's batch count per epoch."""
    rng = np.random.default_rng(seed)
    mine = [np.flatnonzero(sample_part == w) for w in range(WORKERS)]
    steps = min(len(m) for m in mine) // batch
    out = []
    for _ in range(epochs):
        orders = [rng.permutation(m) for m in mine]
        out += [[o[r * batch:(r + 1) * batch] for o in orders] for r in range(steps)]
    return out


# --------------------------------------------------------------------------
# (b) HET vs a no-cache parameter server
# --------------------------------------------------------------------------
def _het_run(train: CTRData, test: CTRData, rounds: list, dim: int, seed: int, bound: int | None,
             capacity: int, policy: str, lr: float, unit: str) -> dict:
    """Train 4 lock-step workers (HET, or the no-cache PS when ``bound`` is None); bytes, AUC, counters."""
    n_emb = sum(train.field_dims)
    server = ShardedServer(n_emb, dim, num_shards=WORKERS, seed=seed)
    cfg = HETConfig(n_emb, dim, capacity, policy=policy, bound=bound or 0, lr=lr, update_unit=unit)
    cls = NoCacheEmbedding if bound is None else HETEmbedding
    workers = [cls(cfg, LocalTransport(server)) for _ in range(WORKERS)]
    model = _model(train, workers[0], dim, seed)
    start = time.perf_counter()
    train_lockstep(workers, model, train, rounds)
    auc = evaluate(model, server.weights(), test)
    stats = [w.transport.stats for w in workers]
    out = dict(bytes=sum(st.total_bytes for st in stats), auc=auc, seconds=time.perf_counter() - start,
               hit=float("nan"), counters=None)
    if bound is not None:
        c = workers[0].worker.counters
        for w in workers[1:]:
            c = c + w.worker.counters
        out.update(hit=c.hits / max(c.unique, 1), counters=c)
    return out


def _breakdown(run: dict, dim: int, base: float) -> str:
    """Where a HET run's bytes go, as % of the no-cache PS's bytes, and rows per unique key."""
    c = run["counters"]
    row = 16 + 4 * dim
    parts = [("(key,version) requests", 16 * c.unique), ("miss fetches", row * c.fetched_new),
             ("stale refetches", row * c.fetched_stale), ("bypass fetches", row * c.fetched_bypass),
             ("bound pushes", row * c.pushed_bound), ("eviction pushes", row * c.pushed_evicted),
             ("bypass pushes", row * c.pushed_bypass), ("final flush", row * c.pushed_flush)]
    assert sum(b for _, b in parts) == run["bytes"], "byte breakdown does not add up"
    u = max(c.unique, 1)
    return ("      bytes in % of the no-cache PS: " + ", ".join(f"{n} {100 * b / base:.1f}" for n, b in parts)
            + f"\n      per unique key looked up: fetches {c.rows_fetched / u:.3f} (miss {c.fetched_new / u:.3f},"
            f" stale {c.fetched_stale / u:.3f}, bypass {c.fetched_bypass / u:.3f}), pushes {c.rows_pushed / u:.3f}"
            f" (bound {c.pushed_bound / u:.3f}, eviction {c.pushed_evicted / u:.3f}, bypass "
            f"{c.pushed_bypass / u:.3f}); occurrences per unique key {c.occurrences / u:.2f}; HET's own "
            f"'data rate' (rows pulled / keys with duplicates, versions ignored) {c.rows_fetched / c.occurrences:.3f}")


def _fixed_shard_rounds(n: int, batch: int, epochs: int, seed: int) -> list[list[np.ndarray]]:
    """As HET's run_hetu.py: worker w always trains on the w-th contiguous quarter (reshuffled per epoch)."""
    rng = np.random.default_rng(seed)
    shards = np.array_split(np.arange(n), WORKERS)
    steps = min(len(s) for s in shards) // batch
    out = []
    for _ in range(epochs):
        orders = [rng.permutation(s) for s in shards]
        out += [[o[r * batch:(r + 1) * batch] for o in orders] for r in range(steps)]
    return out


def _mean(rows: list[dict], key: str, **match) -> float:
    vals = [r[key] for r in rows if all(r.get(k) == v for k, v in match.items())]
    return float(np.mean(vals)) if vals else float("nan")


def part_b(args: argparse.Namespace) -> list[dict]:
    """HET vs the unique-key no-cache PS: headline (HET's defaults, all seeds), cache x bound sweep,
    policies (seed 0), and the Criteo sample multi-epoch as HET's run_hetu.py trains it."""
    dim, bounds, W = args.het_dim, args.het_bounds, WORKERS
    print(f"\n(b) HET cache vs no-cache PS (unique keys) -- {W} workers, in-process simulator.\n"
          f"  synthetic Zipf({args.het_zipf}) CTR: {args.het_rows:,} rows x {args.het_fields} fields x "
          f"{args.het_ids:,} ids, 80/10/10 split, WDL, {args.het_epochs} epoch(s) globally shuffled.  HET's "
          f"defaults (Hsword/Hetu examples/ctr: wdl_criteo.py, run_hetu.py, ParameterServerCommunicate.py): "
          f"embedding dim {dim}, batch {args.het_batch}/worker, embedding SGD lr {args.het_lr}, cache "
          f"{args.het_cache:.0%} of the rows per worker, policy {args.het_policy} (lfuopt), one version step "
          f"per {args.het_unit}.  Headline = bound 10 at these defaults.")
    ceilings = ", ".join(f"bound {b} {steady_state_reduction(b, W, dim):.1%}" for b in sorted({0, 1, 10, 100, *bounds}))
    print("  approximate ceiling of the reduction for data shuffled across workers, any cache size "
          f"(steady_state_reduction: a key every worker looks up alike, once per lookup, always cached): {ceilings}")
    rows: list[dict] = []
    floors: dict[tuple[int, float], float] = {}

    def record(tag: str, name: str, seed: int, run: dict, base: float | None, **extra) -> dict:
        red = 0.0 if base is None else 1 - run["bytes"] / base
        rec = dict(tag=tag, name=name, seed=seed, bytes=run["bytes"], auc=run["auc"], hit=run["hit"],
                   reduction=red, seconds=run["seconds"], **extra)
        rows.append(rec)
        print(f"  [{tag}] seed {seed} {name:<32} {run['bytes'] / 2**20:9.1f} MiB  {red:7.1%} less  AUC "
              f"{run['auc']:.4f}  hit rate {run['hit']:.3f}  ({run['seconds']:.0f} s)", flush=True)
        return rec

    # 1. headline (HET's defaults) over all seeds; 2. cache x bound sweep and policies on seed 0
    for seed in range(args.het_seeds):
        data = make_synthetic_ctr(args.het_rows, [args.het_ids] * args.het_fields, num_dense=13,
                                  zipf_a=args.het_zipf, seed=seed)
        train, _, test = data.split((0.8, 0.1, 0.1), seed=seed)
        n_emb = sum(data.field_dims)
        rounds = _shuffled_rounds(len(train), args.het_batch, args.het_epochs, seed)
        gids = train.global_ids()
        streams = [[gids[r[w]] for r in rounds] for w in range(W)]
        for frac in dict.fromkeys([args.het_cache, *(args.het_sweep_cache if seed == 0 else [])]):
            fl = het_traffic_bound(streams, int(frac * n_emb), dim)
            floors[seed, frac] = fl.max_reduction
            print(f"  seed {seed} cache {frac:.0%}: Belady's MIN (offline, with bypass) misses {fl.misses / fl.unique:.3f} "
                  f"of {fl.unique:,} unique lookups -> no policy and no bound can move less than "
                  f"{fl.min_bytes / 2**20:.1f} MiB, i.e. at most {fl.max_reduction:.1%} fewer bytes", flush=True)

        def run(bound, frac=args.het_cache, policy=args.het_policy):
            return _het_run(train, test, rounds, dim, seed, bound, int(frac * n_emb), policy, args.het_lr,
                            args.het_unit)

        base_run = run(None)
        base = base_run["bytes"]
        record("headline", "no-cache PS", seed, base_run, None, cache=0.0, bound=-1)
        done = {}
        for b in bounds:
            r = run(b)
            done[(args.het_cache, b, args.het_policy)] = r
            record("headline", f"HET bound {b}", seed, r, base, cache=args.het_cache, bound=b)
            if b == 10:
                print(_breakdown(r, dim, base))
        if seed != 0:
            continue
        for frac in args.het_sweep_cache:
            for b in args.het_sweep_bounds:
                r = done.get((frac, b, args.het_policy)) or run(b, frac)
                record("sweep", f"cache {frac:.0%} bound {b}", seed, r, base, cache=frac, bound=b)
                if frac == max(args.het_sweep_cache) and b == 10:
                    print(_breakdown(r, dim, base))
        for policy in args.het_policies:
            r = done.get((args.het_cache, 10, policy)) or run(10, policy=policy)
            record("policy", f"{policy} cache {args.het_cache:.0%} bound 10", seed, r, base, policy=policy)

    print(f"\n  headline, mean over {args.het_seeds} seed(s)   bytes (MiB)   vs no-cache PS   test AUC   AUC - bound 0")
    hl = [r for r in rows if r["tag"] == "headline"]
    base = _mean(hl, "bytes", name="no-cache PS")
    auc0 = _mean(hl, "auc", name="HET bound 0")
    for name in dict.fromkeys(r["name"] for r in hl):
        b, a = _mean(hl, "bytes", name=name), _mean(hl, "auc", name=name)
        print(f"  {name:<36} {b / 2**20:10.1f}   {1 - b / base:9.1%} less   {a:.4f}   {100 * (a - auc0):+.2f} pt")
    if 10 in bounds and 0 in bounds:
        b10, a10 = _mean(hl, "bytes", name="HET bound 10"), _mean(hl, "auc", name="HET bound 10")
        ok = 1 - b10 / base >= 0.8 and abs(a10 - auc0) <= 0.005
        floor = np.mean([floors[sd, args.het_cache] for sd in range(args.het_seeds)])
        print(f"  target (>= 80% fewer bytes at bound 10, AUC within 0.5 pt of bound 0): {1 - b10 / base:.1%} "
              f"fewer (steady-state ceiling {steady_state_reduction(10, W, dim):.1%}; this cache size allows at "
              f"most {floor:.1%} for any policy and bound), {100 * (a10 - auc0):+.2f} pt -> "
              f"{'MET' if ok else 'NOT MET'}")

    sw = [r for r in rows if r["tag"] == "sweep"]
    if sw:
        print("\n  sweep (seed 0): byte reduction vs the no-cache PS / test AUC - bound 0 at the same cache (pt) "
              "/ hit rate")
        print("  cache per worker " + "".join(f"| bound {b:<22}" for b in args.het_sweep_bounds))
        for frac in args.het_sweep_cache:
            a0 = _mean(sw, "auc", cache=frac, bound=0)
            cells = []
            for b in args.het_sweep_bounds:
                r = next(x for x in sw if x["cache"] == frac and x["bound"] == b)
                cells.append(f"| {r['reduction']:6.1%} {100 * (r['auc'] - a0):+5.2f} {r['hit']:.2f}      ")
            print(f"  {frac:>15.0%} " + "".join(cells))
        print("  ceiling          " + "".join(f"| {steady_state_reduction(b, W, dim):6.1%}{'':17}"
                                              for b in args.het_sweep_bounds))
        print("  floor of the bytes at each cache size, any policy and any bound (Belady's MIN): at most "
              + ", ".join(f"{floors[0, frac]:.1%} ({frac:.0%})" for frac in args.het_sweep_cache) + " fewer")

    if args.het_criteo_epochs > 0:
        rows += _part_b_criteo(args, record)
    return rows


def _part_b_criteo(args: argparse.Namespace, record) -> list[dict]:
    """The Criteo sample (8,192 rows, HET's own sampled_*.npy) trained as HET's run_hetu.py does."""
    root = Path(args.gmp_criteo_root) if args.gmp_criteo_root else SHARED / "criteo_het_sampled"
    if not (root / "sampled_sparse_feats.npy").is_file():
        print(f"\n  Criteo sample skipped: {root} not found")
        return []
    data = load_criteo(root)
    train, _, test = data.split((0.9, 0.0, 0.1), seed=0)
    n_emb = sum(data.field_dims)
    dim, epochs = args.het_dim, args.het_criteo_epochs
    rounds = _fixed_shard_rounds(len(train), args.het_batch, epochs, 0)
    print(f"\n  Criteo sample ({root.name}: {len(data):,} rows, {n_emb:,} ids after remapping, 90/10 split, test "
          f"AUC on {len(test)} rows is noise): as HET's run_hetu.py -- each worker trains on its fixed quarter, "
          f"{epochs} epochs ({len(rounds)} steps), batch {args.het_batch}, dim {dim}.  Caches: 10% of the "
          f"remapped table ({int(0.1 * n_emb):,} lines), and all of it (HET caches 10% of its 33.76M-row Criteo "
          f"table, more than every id of the sample)")
    out = []
    base = _het_run(train, test, rounds, dim, 0, None, 0, args.het_policy, args.het_lr, args.het_unit)
    record("criteo", "no-cache PS", 0, base, None, cache=0.0, bound=-1)
    for frac in (0.1, 1.0):
        for b in args.het_bounds:
            r = _het_run(train, test, rounds, dim, 0, b, int(frac * n_emb), args.het_policy, args.het_lr,
                         args.het_unit)
            out.append(record("criteo", f"cache {frac:.0%} bound {b}", 0, r, base["bytes"], cache=frac, bound=b))
            if b == 10:
                print(_breakdown(r, dim, base["bytes"]))
    if 0 in args.het_bounds and 10 in args.het_bounds:
        for frac in (0.1, 1.0):
            r10 = next(r for r in out if r["cache"] == frac and r["bound"] == 10)
            a0 = next(r for r in out if r["cache"] == frac and r["bound"] == 0)["auc"]
            ok = r10["reduction"] >= 0.8 and abs(r10["auc"] - a0) <= 0.005
            print(f"  target on the Criteo sample, cache {frac:.0%} (>= 80% fewer bytes at bound 10, AUC within 0.5 pt "
                  f"of bound 0): {r10['reduction']:.1%} fewer, {100 * (r10['auc'] - a0):+.2f} pt -> "
                  f"{'MET' if ok else 'NOT MET'}")
    return out


# --------------------------------------------------------------------------
# (c) HET-GMP vs random sample partition + id mod N
# --------------------------------------------------------------------------
def _gmp_dataset(name: str, args: argparse.Namespace) -> CTRData:
    if name == "criteo-sample":
        root = Path(args.gmp_criteo_root) if args.gmp_criteo_root else SHARED / "criteo_het_sampled"
        return load_criteo(root)
    return make_synthetic_ctr(args.gmp_rows, [args.gmp_ids] * args.gmp_fields, num_dense=13,
                              zipf_a=args.het_zipf, seed=0)


def part_c(args: argparse.Namespace) -> list[dict]:
    dim = args.gmp_dim
    print(f"\n(c) HET-GMP remote embedding traffic vs random sample partition + id mod {WORKERS} "
          f"(bound 0, no mirrors) -- {WORKERS} workers, in-process simulator, dim {dim}, batch "
          f"{args.gmp_batch}/worker, {args.gmp_epochs} epoch(s), mirrors {args.gmp_store_rate:.0%} of ids "
          f"per worker; traffic = bytes to/from other workers (own shard is local)")
    out = []
    for dname in args.gmp_data:
        data = _gmp_dataset(dname, args)
        ids = data.global_ids()
        n_emb = sum(data.field_dims)
        start = time.perf_counter()
        graph = Bigraph(ids)
        base = random_partition(graph, WORKERS, args.gmp_batch, seed=0)
        gmp = partition_bigraph(graph, PartitionConfig(WORKERS, args.gmp_batch, rounds=args.gmp_rounds))
        t_part = time.perf_counter() - start
        print(f"  {dname}: {len(data):,} samples, {graph.num_embeddings:,} distinct ids, "
              f"{graph.num_edges:,} edges; partitioned in {t_part:.1f} s; expected remote fetches/batch "
              f"(model): random+mod {base.expected_remote_fetches():.0f}, HET-GMP "
              f"{gmp.expected_remote_fetches():.0f}; sample sizes {gmp.sample_sizes().tolist()}")
        variants = [("random + id mod N", base, 0, 0)]
        variants += [("HET-GMP partition only", gmp, 0, 0)]
        variants += [(f"HET-GMP + mirrors, bound {b}", gmp, args.gmp_store_rate, b) for b in args.het_bounds]
        rows = []
        for name, part, budget, bound in variants:
            cfg = GMPConfig(n_emb, dim, bound=bound, lr=args.gmp_lr, update_unit=args.het_unit)
            mirrors = select_replicas(part, float(budget))
            server, workers = simulated_cluster(cfg, part.placement(n_emb), mirrors, seed=0)
            model = _model(data, workers[0], dim, 0)
            t0 = time.perf_counter()
            train_lockstep(workers, model, data, _partition_rounds(part.sample_part, args.gmp_batch,
                                                                   args.gmp_epochs, 0))
            total = sum(w.transport.stats.total_bytes for w in workers)
            reads = sum(w.worker.local_reads + w.worker.mirror_reads + w.worker.remote_reads for w in workers)
            remote = sum(w.worker.remote_reads for w in workers) / reads
            rows.append(dict(data=dname, name=name, bytes=total, remote_share=remote,
                             auc=evaluate(model, server.weights(), data)))
            print(f"    {name:<30} remote bytes {total / 2**20:8.2f} MiB  ({1 - total / rows[0]['bytes']:+7.1%} "
                  f"less)  unique reads neither local nor mirrored {remote:.1%}  train AUC "
                  f"{rows[-1]['auc']:.4f}  ({time.perf_counter() - t0:.0f} s)", flush=True)
        verdict = ", ".join(
            f"{r['name'].replace('HET-GMP ', '')} {1 - r['bytes'] / rows[0]['bytes']:.1%} "
            f"{'MET' if 1 - r['bytes'] / rows[0]['bytes'] >= 0.5 else 'NOT MET'}" for r in rows[1:])
        print(f"    target >= 50% less traffic: {verdict}")
        out += rows
    return out


def add_arguments(g) -> None:
    """Flags of parts (b) and (c) on a parser or argument group; all prefixed ``--het-`` / ``--gmp-``
    so they can join other benches (bench_embeddings.py adds them through ``add_part_b_arguments``)."""
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731  ('' = none)
    g.add_argument("--het-batch", type=int, default=128,
                   help="per-worker batch size (b; HET's run_hetu.py: 128)")
    g.add_argument("--het-lr", type=float, default=0.01,
                   help="embedding SGD learning rate (b; HET's wdl_criteo.py: 0.01)")
    g.add_argument("--het-unit", default="occurrence", choices=["step", "occurrence"],
                   help="what one version step counts (b and c)")
    g.add_argument("--het-bounds", type=ints, default=[0, 10, 100], help="staleness bounds (b and c)")
    g.add_argument("--het-zipf", type=float, default=1.1, help="Zipf exponent of the synthetic ids")
    g.add_argument("--het-seeds", type=int, default=3, help="seeds of part (b)")
    g.add_argument("--het-rows", type=int, default=200_000)
    g.add_argument("--het-fields", type=int, default=8)
    g.add_argument("--het-ids", type=int, default=20_000, help="ids per field")
    g.add_argument("--het-dim", type=int, default=128, help="embedding dim (b; HET's wdl_criteo.py: 128)")
    g.add_argument("--het-cache", type=float, default=0.1,
                   help="cache lines per worker, fraction of rows (HET: num_rows // 10)")
    g.add_argument("--het-policy", default="lfu_pinned", choices=["lru", "lfu", "lfu_pinned"],
                   help="cache policy of the headline (HET's examples: lfuopt)")
    g.add_argument("--het-epochs", type=int, default=2)
    g.add_argument("--het-sweep-cache", type=lambda s: [float(x) for x in s.split(",") if x],
                   default=[0.01, 0.05, 0.1, 0.2, 1.0], help="cache fractions of the sweep (seed 0; '' skips it)")
    g.add_argument("--het-sweep-bounds", type=ints, default=[0, 1, 10, 100], help="bounds of the sweep")
    g.add_argument("--het-policies", type=lambda s: [x for x in s.split(",") if x],
                   default=["lru", "lfu", "lfu_pinned"], help="policies compared at bound 10 (seed 0; '' skips)")
    g.add_argument("--het-criteo-epochs", type=int, default=50,
                   help="epochs on the Criteo sample (HET's run_hetu.py default: 50; 0 skips it)")
    g.add_argument("--gmp-data", type=lambda s: s.split(","), default=["criteo-sample", "synthetic"])
    g.add_argument("--gmp-rows", type=int, default=200_000)
    g.add_argument("--gmp-fields", type=int, default=8)
    g.add_argument("--gmp-ids", type=int, default=20_000)
    g.add_argument("--gmp-dim", type=int, default=64)
    g.add_argument("--gmp-batch", type=int, default=256, help="per-worker batch size (c)")
    g.add_argument("--gmp-lr", type=float, default=0.1, help="embedding SGD learning rate (c)")
    g.add_argument("--gmp-epochs", type=int, default=1)
    g.add_argument("--gmp-store-rate", type=float, default=0.01, help="mirrors per worker, fraction of ids")
    g.add_argument("--gmp-rounds", type=int, default=5, help="partitioner refinement rounds")
    g.add_argument("--gmp-criteo-root", default=None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="b,c")
    p.add_argument("--threads", type=int, default=1)
    add_arguments(p.add_argument_group("HET / HET-GMP (parts b, c)"))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    parts = set(args.parts.split(","))
    print(f"bench_het: torch {torch.__version__}, {args.threads} thread(s), pid {os.getpid()}")
    for name, fn in (("b", part_b), ("c", part_c)):
        if name in parts:
            start = time.perf_counter()
            fn(args)
            print(f"part ({name}) took {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
