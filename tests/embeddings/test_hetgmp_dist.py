"""HET-GMP over real processes: 2 Gloo ranks on 127.0.0.1 exchanging rows with sgl.comm all_to_all."""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import sgl.comm as comm
from sgl.embeddings.hetgmp import (
    Bigraph, GMPConfig, PartitionConfig, distributed_embedding, partition_bigraph, select_replicas,
    simulated_cluster,
)

ROUNDS, BATCH, BOUND = 10, 8, 2
RUN_TIMEOUT = 60.0


def _plan():
    """Data, partition, placement and mirrors (deterministic: every process computes the same)."""
    rng = np.random.default_rng(4)
    ids = rng.integers(0, 30, (200, 3)) + 30 * (np.arange(200) % 2)[:, None]
    part = partition_bigraph(Bigraph(ids), PartitionConfig(num_parts=2, batch_size=BATCH, rounds=2))
    rows = int(ids.max()) + 1
    cfg = GMPConfig(rows, 4, bound=BOUND, lr=0.2)
    labels = torch.from_numpy((ids[:, 1] % 2).astype(np.float32))
    per_worker = [torch.from_numpy(np.flatnonzero(part.sample_part == w)) for w in range(2)]
    return torch.from_numpy(ids), labels, cfg, part.placement(rows), select_replicas(part, 8), per_worker


def _step_loss(out, y):
    return F.binary_cross_entropy_with_logits(out.sum((1, 2)), y)


def _train_rank(rank: int, world: int, plan: tuple) -> dict:
    ids, labels, cfg, placement, mirrors, per_worker = plan
    emb = distributed_embedding(cfg, placement, mirrors[rank], seed=1)
    mine = per_worker[rank]
    for r in range(ROUNDS):
        b = mine[r * BATCH:(r + 1) * BATCH]
        _step_loss(emb(ids[b]), labels[b]).backward()
        emb.step()
    emb.flush()
    shard = emb.worker.shard
    return {"rows": shard.rows, "weight": shard.weight, "version": shard.version,
            "bytes": emb.transport.stats.total_bytes, "mirror_reads": emb.worker.mirror_reads}


def test_two_process_hetgmp_matches_lockstep_simulator() -> None:
    plan = _plan()  # partitioned once here; the ranks get the same plan
    results = comm.spawn(_train_rank, 2, plan, timeout=RUN_TIMEOUT, comm_timeout=20.0)
    ids, labels, cfg, placement, mirrors, per_worker = plan
    server, workers = simulated_cluster(cfg, placement, mirrors, seed=1)
    for r in range(ROUNDS):
        bs = [p[r * BATCH:(r + 1) * BATCH] for p in per_worker]
        outs = [w(ids[b]) for w, b in zip(workers, bs)]
        for w, out, b in zip(workers, outs, bs):
            _step_loss(out, labels[b]).backward()
            w.step()
    for w in workers:
        w.flush()
    weight = torch.empty_like(server.weights())
    version = torch.empty_like(server.versions())
    for res in results:
        weight[res["rows"]] = res["weight"]
        version[res["rows"]] = res["version"]
    assert torch.equal(weight, server.weights()) and torch.equal(version, server.versions())
    assert [r["bytes"] for r in results] == [w.transport.stats.total_bytes for w in workers]
    assert all(r["mirror_reads"] > 0 for r in results)


def _dying_child(rank: int, port: int, out_dir: str, plan: tuple) -> None:
    torch.set_num_threads(1)
    start = time.monotonic()
    try:
        comm.init("gloo", rank=rank, world_size=2, master_addr="127.0.0.1", master_port=port, timeout=8.0)
        ids, labels, cfg, placement, mirrors, per_worker = plan
        emb = distributed_embedding(cfg, placement, mirrors[rank], seed=1)
        for r in range(ROUNDS):
            if rank == 1 and r == 4:
                os._exit(3)
            b = per_worker[rank][r * BATCH:(r + 1) * BATCH]
            _step_loss(emb(ids[b]), labels[b]).backward()
            emb.step()
        outcome = "finished"
    except Exception as exc:  # noqa: BLE001 -- the test inspects it
        outcome = f"{type(exc).__name__}: {exc}"
    Path(out_dir, f"rank{rank}").write_text(f"{time.monotonic() - start:.2f}\n{outcome}")
    os._exit(0)


def test_dead_gmp_worker_makes_survivor_fail_fast(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    port = comm._free_port()
    plan = _plan()
    procs = [ctx.Process(target=_dying_child, args=(r, port, str(tmp_path), plan)) for r in range(2)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + RUN_TIMEOUT
    for p in procs:
        p.join(max(0.1, deadline - time.monotonic()))
    hung = [p.is_alive() for p in procs]
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(5)
    assert not any(hung), "a rank hung instead of failing"
    assert procs[1].exitcode == 3
    seconds, outcome = (tmp_path / "rank0").read_text().split("\n", 1)
    assert outcome.startswith("CommError: HET DistTransport."), outcome
    assert "a peer rank died or stopped training" in outcome
    assert float(seconds) < 30.0
