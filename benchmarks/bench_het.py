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
from sgl.embeddings.het import HETConfig, HETEmbedding, LocalTransport, NoCacheEmbedding, ShardedServer
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
def part_b(args: argparse.Namespace) -> list[dict]:
    dim = args.het_dim
    print(f"\n(b) HET cache vs no-cache PS (unique keys) -- {WORKERS} workers, in-process simulator, "
          f"synthetic Zipf CTR: {args.het_rows:,} rows x {args.het_fields} fields x {args.het_ids:,} ids, "
          f"dim {dim}, batch {args.het_batch}/worker, {args.het_epochs} epoch(s), cache "
          f"{args.het_cache:.0%} of rows per worker, policy lfu_pinned, seeds {args.het_seeds}")
    rows = []
    for seed in range(args.het_seeds):
        data = make_synthetic_ctr(args.het_rows, [args.het_ids] * args.het_fields, num_dense=13,
                                  zipf_a=args.het_zipf, seed=seed)
        train, _, test = data.split((0.8, 0.1, 0.1), seed=seed)
        n_emb = sum(data.field_dims)
        rounds = _shuffled_rounds(len(train), args.het_batch, args.het_epochs, seed)
        capacity = int(args.het_cache * n_emb)
        variants = [("no-cache PS", None)] + [(f"HET bound {b}", b) for b in args.het_bounds]
        for name, bound in variants:
            server = ShardedServer(n_emb, dim, num_shards=WORKERS, seed=seed)
            cfg = HETConfig(n_emb, dim, capacity, policy="lfu_pinned", bound=bound or 0,
                            lr=args.het_lr, update_unit=args.het_unit)
            cls = NoCacheEmbedding if bound is None else HETEmbedding
            workers = [cls(cfg, LocalTransport(server)) for _ in range(WORKERS)]
            model = _model(data, workers[0], dim, seed)
            start = time.perf_counter()
            train_lockstep(workers, model, train, rounds)
            auc = evaluate(model, server.weights(), test)
            total = sum(w.transport.stats.total_bytes for w in workers)
            hit = (np.mean([w.worker.hit_rate for w in workers]) if bound is not None else float("nan"))
            stats = [w.transport.stats for w in workers]
            keys = sum(st.keys_requested for st in stats)
            fetched = sum(st.rows_fetched for st in stats) / keys
            pushed = sum(st.rows_pushed for st in stats) / keys
            rows.append(dict(seed=seed, name=name, bytes=total, auc=auc, hit=hit,
                             seconds=time.perf_counter() - start))
            print(f"  seed {seed} {name:<14} bytes {total / 2**20:9.1f} MiB  AUC {auc:.4f}  "
                  f"hit rate {hit:.3f}  rows fetched/pushed per unique key {fetched:.3f}/{pushed:.3f}  "
                  f"({rows[-1]['seconds']:.0f} s)", flush=True)
    print(f"\n  mean over {args.het_seeds} seed(s)        bytes (MiB)   vs no-cache   AUC      AUC - bound 0")
    base = np.mean([r["bytes"] for r in rows if r["name"] == "no-cache PS"])
    auc0 = np.mean([r["auc"] for r in rows if r["name"] == "HET bound 0"]) if 0 in args.het_bounds else float("nan")
    for name in dict.fromkeys(r["name"] for r in rows):
        b = np.mean([r["bytes"] for r in rows if r["name"] == name])
        a = np.mean([r["auc"] for r in rows if r["name"] == name])
        print(f"  {name:<28} {b / 2**20:10.1f}   {1 - b / base:+8.1%} less   {a:.4f}   {100 * (a - auc0):+.2f} pt")
    if 10 in args.het_bounds and 0 in args.het_bounds:
        b10 = np.mean([r["bytes"] for r in rows if r["name"] == "HET bound 10"])
        a10 = np.mean([r["auc"] for r in rows if r["name"] == "HET bound 10"])
        ok = 1 - b10 / base >= 0.8 and abs(a10 - auc0) <= 0.005
        print(f"  target (>= 80% fewer bytes at bound 10, AUC within 0.5 pt of bound 0): "
              f"{1 - b10 / base:.1%} fewer, {100 * (a10 - auc0):+.2f} pt -> {'MET' if ok else 'NOT MET'}")
    return rows


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
          f"{args.het_batch}/worker, {args.gmp_epochs} epoch(s), mirrors {args.gmp_store_rate:.0%} of ids "
          f"per worker; traffic = bytes to/from other workers (own shard is local)")
    out = []
    for dname in args.gmp_data:
        data = _gmp_dataset(dname, args)
        ids = data.global_ids()
        n_emb = sum(data.field_dims)
        start = time.perf_counter()
        graph = Bigraph(ids)
        base = random_partition(graph, WORKERS, args.het_batch, seed=0)
        gmp = partition_bigraph(graph, PartitionConfig(WORKERS, args.het_batch, rounds=args.gmp_rounds))
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
            cfg = GMPConfig(n_emb, dim, bound=bound, lr=args.het_lr, update_unit=args.het_unit)
            mirrors = select_replicas(part, float(budget))
            server, workers = simulated_cluster(cfg, part.placement(n_emb), mirrors, seed=0)
            model = _model(data, workers[0], dim, 0)
            t0 = time.perf_counter()
            train_lockstep(workers, model, data, _partition_rounds(part.sample_part, args.het_batch,
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
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    g.add_argument("--het-batch", type=int, default=256, help="per-worker batch size (b and c)")
    g.add_argument("--het-lr", type=float, default=0.1, help="embedding SGD learning rate (b and c)")
    g.add_argument("--het-unit", default="occurrence", choices=["step", "occurrence"],
                   help="what one version step counts (b and c)")
    g.add_argument("--het-bounds", type=ints, default=[0, 10, 100], help="staleness bounds (b and c)")
    g.add_argument("--het-zipf", type=float, default=1.1, help="Zipf exponent of the synthetic ids")
    g.add_argument("--het-seeds", type=int, default=3, help="seeds of part (b)")
    g.add_argument("--het-rows", type=int, default=200_000)
    g.add_argument("--het-fields", type=int, default=8)
    g.add_argument("--het-ids", type=int, default=20_000, help="ids per field")
    g.add_argument("--het-dim", type=int, default=64)
    g.add_argument("--het-cache", type=float, default=0.1, help="cache lines per worker, fraction of rows")
    g.add_argument("--het-epochs", type=int, default=2)
    g.add_argument("--gmp-data", type=lambda s: s.split(","), default=["criteo-sample", "synthetic"])
    g.add_argument("--gmp-rows", type=int, default=200_000)
    g.add_argument("--gmp-fields", type=int, default=8)
    g.add_argument("--gmp-ids", type=int, default=20_000)
    g.add_argument("--gmp-dim", type=int, default=64)
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
    if "b" in parts:
        part_b(args)
    if "c" in parts:
        part_c(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
