"""HET and HET-GMP over real processes: 2 Gloo ranks on 127.0.0.1 (sgl.comm), with hard timeouts.

One spawned run trains both systems (starting processes dominates the cost); the dead-rank test
runs a HET pair and a HET-GMP pair at the same time.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import sgl.comm as comm
from sgl.errors import CommError
from sgl.embeddings.het import DistTransport, HETConfig, HETEmbedding, LocalTransport, ShardedServer
from sgl.embeddings.hetgmp import (
    Bigraph, GMPConfig, PartitionConfig, distributed_embedding, partition_bigraph, select_replicas,
    simulated_cluster,
)

VOCAB, DIM, BATCH, ROUNDS, BOUND = 60, 4, 6, 12, 2
RUN_TIMEOUT = 60.0


def _loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(out.sum((1, 2)), y)


# ---------------------------------------------------------------- HET workload
def _het_data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    probs = torch.arange(1, VOCAB + 1, dtype=torch.float64) ** -1.1
    ids = torch.multinomial(probs, ROUNDS * 2 * BATCH * 3, replacement=True, generator=g)
    return ids.reshape(-1, 3), torch.randint(0, 2, (ROUNDS * 2 * BATCH,), generator=g).float()


def _het_config() -> HETConfig:
    return HETConfig(VOCAB, DIM, cache_capacity=10, bound=BOUND, lr=0.2, policy="lru")


def _het_batch(ids, labels, r, w):
    lo = (r * 2 + w) * BATCH
    return ids[lo:lo + BATCH], labels[lo:lo + BATCH]


# ---------------------------------------------------------------- HET-GMP workload
def _gmp_plan():
    """Data, placement and mirrors, computed once in the parent and shipped to the ranks."""
    rng = np.random.default_rng(4)
    ids = rng.integers(0, 30, (200, 3)) + 30 * (np.arange(200) % 2)[:, None]
    part = partition_bigraph(Bigraph(ids), PartitionConfig(num_parts=2, batch_size=8, rounds=2))
    rows = int(ids.max()) + 1
    cfg = GMPConfig(rows, 4, bound=BOUND, lr=0.2)
    labels = torch.from_numpy((ids[:, 1] % 2).astype(np.float32))
    per_worker = [torch.from_numpy(np.flatnonzero(part.sample_part == w)) for w in range(2)]
    return torch.from_numpy(ids), labels, cfg, part.placement(rows), select_replicas(part, 8), per_worker


def _gmp_batch(per_worker, r, w):
    return per_worker[w][r * 8:(r + 1) * 8]


def _shard_state(emb) -> dict:
    shard = emb.transport.local_shard
    return {"rows": shard.rows, "weight": shard.weight, "version": shard.version,
            "bytes": emb.transport.stats.total_bytes}


def _train_rank(rank: int, world: int, plan: tuple) -> dict:
    ids, labels = _het_data()
    het = HETEmbedding(_het_config(), DistTransport(VOCAB, DIM, seed=3))
    assert het.transport.comm_device == torch.device("cpu")  # Gloo moves host tensors (NCCL: the rank's GPU)
    for r in range(ROUNDS):
        x, y = _het_batch(ids, labels, r, rank)
        _loss(het(x), y).backward()
        het.step()
    het.flush()
    g_ids, g_labels, cfg, placement, mirrors, per_worker = plan
    gmp = distributed_embedding(cfg, placement, mirrors[rank], seed=1)
    for r in range(10):
        b = _gmp_batch(per_worker, r, rank)
        _loss(gmp(g_ids[b]), g_labels[b]).backward()
        gmp.step()
    gmp.flush()
    return {"het": _shard_state(het), "gmp": dict(_shard_state(gmp), mirror_reads=gmp.worker.mirror_reads)}


def _gather(results: list[dict], key: str, like: ShardedServer) -> tuple[torch.Tensor, torch.Tensor]:
    weight, version = torch.empty_like(like.weights()), torch.empty_like(like.versions())
    for res in results:
        weight[res[key]["rows"]] = res[key]["weight"]
        version[res[key]["rows"]] = res[key]["version"]
    return weight, version


def test_two_process_het_and_hetgmp_match_lockstep_simulators() -> None:
    plan = _gmp_plan()
    results = comm.spawn(_train_rank, 2, plan, timeout=RUN_TIMEOUT, comm_timeout=20.0)

    # HET: the same rounds in one process, every worker's lookup before any update
    ids, labels = _het_data()
    server = ShardedServer(VOCAB, DIM, num_shards=2, seed=3)
    workers = [HETEmbedding(_het_config(), LocalTransport(server)) for _ in range(2)]
    for r in range(ROUNDS):
        outs = [(het(_het_batch(ids, labels, r, w)[0]), _het_batch(ids, labels, r, w)[1])
                for w, het in enumerate(workers)]
        for het, (out, y) in zip(workers, outs):
            _loss(out, y).backward()
            het.step()
    for het in workers:
        het.flush()
    weight, version = _gather(results, "het", server)
    assert torch.equal(weight, server.weights()) and torch.equal(version, server.versions())
    # every occurrence of every key on both ranks reached a shard (the default update unit)
    assert int(version.sum()) == ROUNDS * 2 * BATCH * 3
    assert [res["het"]["bytes"] for res in results] == [w.transport.stats.total_bytes for w in workers]

    # HET-GMP
    g_ids, g_labels, cfg, placement, mirrors, per_worker = plan
    server, workers = simulated_cluster(cfg, placement, mirrors, seed=1)
    for r in range(10):
        bs = [_gmp_batch(per_worker, r, w) for w in range(2)]
        outs = [w(g_ids[b]) for w, b in zip(workers, bs)]
        for w, out, b in zip(workers, outs, bs):
            _loss(out, g_labels[b]).backward()
            w.step()
    for w in workers:
        w.flush()
    weight, version = _gather(results, "gmp", server)
    assert torch.equal(weight, server.weights()) and torch.equal(version, server.versions())
    assert [res["gmp"]["bytes"] for res in results] == [w.transport.stats.total_bytes for w in workers]
    assert all(res["gmp"]["mirror_reads"] > 0 for res in results)


# --------------------------------------------------------------------------
# A rank that dies mid-training: the survivor must fail fast with a clear error.
# comm.spawn kills everyone as soon as one rank dies, so this test runs its own
# processes and lets the survivors report what they saw.
# --------------------------------------------------------------------------
def _dying_child(kind: str, rank: int, port: int, out_dir: str, plan: tuple) -> None:
    torch.set_num_threads(1)
    start = time.monotonic()
    try:
        comm.init("gloo", rank=rank, world_size=2, master_addr="127.0.0.1", master_port=port,
                  timeout=8.0)
        if kind == "het":
            ids, labels = _het_data()
            emb = HETEmbedding(_het_config(), DistTransport(VOCAB, DIM, seed=3))
            batch = lambda r: _het_batch(ids, labels, r, rank)  # noqa: E731
        else:
            g_ids, g_labels, cfg, placement, mirrors, per_worker = plan
            emb = distributed_embedding(cfg, placement, mirrors[rank], seed=1)
            batch = lambda r: (g_ids[_gmp_batch(per_worker, r, rank)],  # noqa: E731
                               g_labels[_gmp_batch(per_worker, r, rank)])
        for r in range(10):
            if rank == 1 and r == 3:
                os._exit(3)  # crash without any goodbye
            x, y = batch(r)
            _loss(emb(x), y).backward()
            emb.step()
        outcome = "finished"
    except Exception as exc:  # noqa: BLE001 -- the test inspects it
        outcome = f"{type(exc).__name__}: {exc}"
    Path(out_dir, f"{kind}{rank}").write_text(f"{time.monotonic() - start:.2f}\n{outcome}")
    os._exit(0)


def test_dead_rank_makes_survivor_fail_fast(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    plan = _gmp_plan()
    procs = {}
    for kind in ("het", "gmp"):
        port = comm._free_port()
        for r in range(2):
            procs[kind, r] = ctx.Process(target=_dying_child, args=(kind, r, port, str(tmp_path), plan))
    for p in procs.values():
        p.start()
    deadline = time.monotonic() + RUN_TIMEOUT
    for p in procs.values():
        p.join(max(0.1, deadline - time.monotonic()))
    hung = [key for key, p in procs.items() if p.is_alive()]
    for p in procs.values():
        if p.is_alive():
            p.kill()
            p.join(5)
    assert not hung, f"{hung} hung instead of failing"
    for kind in ("het", "gmp"):
        assert procs[kind, 1].exitcode == 3
        seconds, outcome = (tmp_path / f"{kind}0").read_text().split("\n", 1)
        assert outcome.startswith("CommError: HET DistTransport."), (kind, outcome)
        assert "a peer rank died or stopped training" in outcome
        assert float(seconds) < 30.0  # start-up + 3 steps + at most one 8 s comm timeout


def test_dist_transport_needs_init() -> None:
    with pytest.raises(CommError, match="not initialised"):
        DistTransport(10, 2)
