"""HET over real processes: 2 Gloo ranks on 127.0.0.1 (sgl.comm), with hard timeouts."""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import sgl.comm as comm
from sgl.embeddings.het import DistTransport, HETConfig, HETEmbedding, LocalTransport, ShardedServer

VOCAB, DIM, BATCH, ROUNDS, BOUND = 60, 4, 6, 12, 2
RUN_TIMEOUT = 60.0


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    probs = torch.arange(1, VOCAB + 1, dtype=torch.float64) ** -1.1
    ids = torch.multinomial(probs, ROUNDS * 2 * BATCH * 3, replacement=True, generator=g)
    return ids.reshape(-1, 3), torch.randint(0, 2, (ROUNDS * 2 * BATCH,), generator=g).float()


def _config() -> HETConfig:
    return HETConfig(VOCAB, DIM, cache_capacity=10, bound=BOUND, lr=0.2, policy="lru")


def _batch(ids, labels, r, w):
    lo = (r * 2 + w) * BATCH
    return ids[lo:lo + BATCH], labels[lo:lo + BATCH]


def _train_rank(rank: int, world: int) -> dict:
    ids, labels = _data()
    het = HETEmbedding(_config(), DistTransport(VOCAB, DIM, seed=3))
    for r in range(ROUNDS):
        x, y = _batch(ids, labels, r, rank)
        F.binary_cross_entropy_with_logits(het(x).sum((1, 2)), y).backward()
        het.step()
    het.flush()
    shard = het.transport.shard
    return {"rows": shard.rows, "weight": shard.weight, "version": shard.version,
            "bytes": het.transport.stats.total_bytes}


def test_two_process_het_matches_lockstep_simulator() -> None:
    results = comm.spawn(_train_rank, 2, timeout=RUN_TIMEOUT, comm_timeout=20.0)
    ids, labels = _data()
    server = ShardedServer(VOCAB, DIM, num_shards=2, seed=3)
    workers = [HETEmbedding(_config(), LocalTransport(server)) for _ in range(2)]
    for r in range(ROUNDS):
        outs = [(het(_batch(ids, labels, r, w)[0]), _batch(ids, labels, r, w)[1])
                for w, het in enumerate(workers)]
        for het, (out, y) in zip(workers, outs):
            F.binary_cross_entropy_with_logits(out.sum((1, 2)), y).backward()
            het.step()
    for het in workers:
        het.flush()
    weight, version = torch.empty(VOCAB, DIM), torch.empty(VOCAB, dtype=torch.long)
    for res in results:
        weight[res["rows"]] = res["weight"]
        version[res["rows"]] = res["version"]
    assert torch.equal(weight, server.weights())
    assert torch.equal(version, server.versions())
    # every (batch, key) step of both ranks reached the servers
    steps = sum(int(torch.unique(_batch(ids, labels, r, w)[0]).numel())
                for r in range(ROUNDS) for w in range(2))
    assert int(version.sum()) == steps
    assert [res["bytes"] for res in results] == [w.transport.stats.total_bytes for w in workers]


# --------------------------------------------------------------------------
# A rank that dies mid-training: the survivor must fail fast with a clear error.
# comm.spawn kills everyone as soon as one rank dies, so this test runs its own
# two processes and lets the survivor report what it saw.
# --------------------------------------------------------------------------
def _dying_child(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    start = time.monotonic()
    try:
        comm.init("gloo", rank=rank, world_size=2, master_addr="127.0.0.1", master_port=port,
                  timeout=8.0)
        ids, labels = _data()
        het = HETEmbedding(_config(), DistTransport(VOCAB, DIM, seed=3))
        for r in range(ROUNDS):
            if rank == 1 and r == 3:
                os._exit(3)  # crash without any goodbye
            x, y = _batch(ids, labels, r, rank)
            F.binary_cross_entropy_with_logits(het(x).sum((1, 2)), y).backward()
            het.step()
        outcome = "finished"
    except Exception as exc:  # noqa: BLE001 -- the test inspects it
        outcome = f"{type(exc).__name__}: {exc}"
    Path(out_dir, f"rank{rank}").write_text(f"{time.monotonic() - start:.2f}\n{outcome}")
    os._exit(0)


def test_dead_worker_makes_survivor_fail_fast(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    port = comm._free_port()
    procs = [ctx.Process(target=_dying_child, args=(r, port, str(tmp_path))) for r in range(2)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + RUN_TIMEOUT
    for p in procs:
        p.join(max(0.1, deadline - time.monotonic()))
    alive = [p.is_alive() for p in procs]
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(5)
    assert not any(alive), "a rank hung instead of failing"
    assert procs[1].exitcode == 3
    seconds, outcome = (tmp_path / "rank0").read_text().split("\n", 1)
    assert outcome.startswith("CommError: HET DistTransport."), outcome
    assert "a peer rank died or stopped training" in outcome
    assert float(seconds) < 30.0  # init + 3 steps + at most one 8 s comm timeout
