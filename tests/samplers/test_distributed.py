"""Distributed neighbour sampling: partitions, identity with the single-process sampler, traffic, errors.

Multi-process tests run 2 Gloo ranks on 127.0.0.1 (``comm.spawn``, hard timeouts); one spawned
run checks both partition methods and every sampler mode, because starting processes dominates
the cost. "The same sample" means bit-identical to ``NeighborSampler(graph, fanouts, threads=1)``
(the counter-based path; the numpy default path draws from one sequential stream).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import sgl.comm as comm
from sgl.datasets import csbm
from sgl.errors import ConfigError, GraphError
from sgl.samplers import DistGraph, DistNeighborSampler, NeighborSampler, PartitionBook, partition_nodes

RUN_TIMEOUT = 60.0
FANOUTS = [4, 3]


def _graph():
    return csbm(240, num_classes=3, avg_degree=6, num_features=8, train_per_class=10, num_val=40, num_test=60, seed=0)


def _same(batch, ref) -> None:
    assert torch.equal(batch.n_id, ref.n_id)
    assert torch.equal(batch.output_nodes, ref.output_nodes)
    assert torch.equal(batch.last_input_nodes, ref.last_input_nodes)
    assert len(batch.blocks) == len(ref.blocks)
    for a, b in zip(batch.blocks, ref.blocks):
        assert a.size == b.size and torch.equal(a.edge_index, b.edge_index)


# ---------------------------------------------------------------- one process
@pytest.mark.parametrize("replace", [False, True])
def test_one_process_sample_equals_the_counter_based_neighbor_sampler(replace):
    g = _graph()
    sampler = DistNeighborSampler(DistGraph.from_graph(g), FANOUTS, replace=replace, threads=2)
    ref = NeighborSampler(g, FANOUTS, replace=replace, threads=1)
    seeds = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(0))[:40]
    for seed in range(3):
        batch = sampler.sample(seeds, seed=seed)
        _same(batch, ref.sample(seeds, seed=seed))
        assert torch.equal(batch.x, g.x[batch.n_id]) and torch.equal(batch.y, g.y[seeds])
    rng_a, rng_b = np.random.default_rng([1, 2, 3]), np.random.default_rng([1, 2, 3])
    _same(sampler.sample(seeds, rng=rng_a), ref.sample(seeds, rng=rng_b))
    empty = sampler.sample(torch.empty(0, dtype=torch.long), seed=0)
    assert empty.batch_size == 0 and empty.n_id.numel() == 0 and empty.x.shape == (0, g.num_features)
    assert sampler.traffic.bytes_fetched == 0 and sampler.traffic.remote_feature_rows == 0


@pytest.mark.parametrize("method", ["metis", "range", "fennel"])
def test_parts_hold_their_nodes_rows_and_features(method):
    g = _graph()
    parts = partition_nodes(g, 3, method)
    assert parts.shape == (g.num_nodes,) and set(parts.tolist()) == {0, 1, 2}
    assert np.array_equal(parts, partition_nodes(g, 3, method))  # deterministic on every rank
    indptr, indices = g.indptr.numpy(), g.indices.numpy()
    seen = []
    for rank in range(3):
        dg = DistGraph.from_graph(g, parts=parts, rank=rank)
        assert np.array_equal(dg.nodes, np.flatnonzero(parts == rank))
        assert np.array_equal(dg.book.owner[dg.nodes], np.full(dg.nodes.size, rank))
        assert np.array_equal(dg.book.local[dg.nodes], np.arange(dg.nodes.size))
        for i, v in enumerate(dg.nodes):
            assert np.array_equal(dg.indices[dg.indptr[i]:dg.indptr[i + 1]], indices[indptr[v]:indptr[v + 1]])
        assert torch.equal(dg.x, g.x[dg.nodes]) and torch.equal(dg.y, g.y[dg.nodes])
        assert np.array_equal(dg.split_nodes("train"), np.intersect1d(dg.nodes, g.train_mask.nonzero().numpy()))
        seen.append(dg.nodes)
    assert np.array_equal(np.sort(np.concatenate(seen)), np.arange(g.num_nodes))
    if method == "range":  # contiguous and balanced
        assert bool((np.diff(parts) >= 0).all()) and np.ptp(np.bincount(parts)) <= 1


def test_bad_input_gets_clear_errors():
    g = _graph()
    with pytest.raises(ConfigError, match="241 processes but the graph has only 240 nodes"):
        partition_nodes(g, 241, "range")
    with pytest.raises(ConfigError, match="unknown partition method"):
        partition_nodes(g, 2, "spectral")
    with pytest.raises(ConfigError, match=r"partition\(s\) \[2\] of 3 own no node: more processes than"):
        PartitionBook.from_parts(np.arange(g.num_nodes) % 2, num_parts=3)
    with pytest.raises(ConfigError, match="owners must be in"):
        DistGraph.from_graph(g, parts=np.arange(g.num_nodes) % 3, num_parts=2, rank=0)
    two = DistGraph.from_graph(g, method="range", rank=1, num_parts=2)
    with pytest.raises(ConfigError, match="part 1 of 2 but this process is rank 0 of 1"):
        DistNeighborSampler(two, FANOUTS)
    sampler = DistNeighborSampler(DistGraph.from_graph(g), FANOUTS)
    with pytest.raises(GraphError, match="duplicates"):
        sampler.sample([1, 1])
    with pytest.raises(GraphError, match=r"global ids in \[0, 240\)"):
        sampler.sample([5, 240])
    with pytest.raises(GraphError, match="integer ids"):
        sampler.sample(torch.tensor([0.5]))
    with pytest.raises(GraphError, match="'x' or 'y'"):
        sampler.fetch([0], "z")
    with pytest.raises(ConfigError, match="threads"):
        DistNeighborSampler(DistGraph.from_graph(g), FANOUTS, threads=0)


# ---------------------------------------------------------------- two processes
def _sample_rank(rank: int, world: int) -> dict:
    torch.set_num_threads(1)
    g = _graph()
    out = {}
    for method in ("metis", "range"):
        dg = DistGraph.from_graph(g, method=method)
        owned = DistNeighborSampler(dg, FANOUTS)
        routed = DistNeighborSampler(dg, FANOUTS, replace=True, owned_seeds=False)
        seeds = dg.nodes[rank::3][:25]
        own = owned.sample(seeds, seed=7)
        own_traffic = owned.traffic.as_dict()
        anywhere = np.arange(rank, g.num_nodes, 9)  # both ranks' nodes
        routed_batch = routed.sample(anywhere, seed=3)
        # a rank out of seeds keeps sampling with none while the other one works
        owned.traffic.reset()
        lone = owned.sample(np.empty(0, dtype=np.int64) if rank == 0 else dg.nodes[:6], seed=1)
        try:  # both ranks pass seeds they do not own: both raise before any exchange
            owned.sample(np.flatnonzero(dg.book.owner != rank)[:3], seed=0)
            foreign = "no error"
        except GraphError as exc:
            foreign = str(exc)
        out[method] = {"owner": dg.book.owner, "seeds": seeds, "own": own, "own_traffic": own_traffic,
                       "anywhere": anywhere, "routed": routed_batch, "routed_traffic": routed.traffic.as_dict(),
                       "lone": lone, "lone_traffic": owned.traffic.as_dict(), "foreign": foreign}
    return out


def _expected_sample_bytes(batch, owner: np.ndarray, rank: int) -> tuple:
    """(sent, received) payload bytes of sampling ``batch`` on ``rank`` of 2, from the reference blocks."""
    sent = received = 0
    for block in batch.blocks:
        frontier = batch.n_id[:block.num_dst].numpy()
        counts = np.bincount(block.edge_index[1].numpy(), minlength=block.num_dst)
        remote = owner[frontier] != rank
        sent += 8 * (int(remote.sum()) + int(remote.any()))  # ids + the one key header per peer
        received += 8 * (int(remote.sum()) + int(counts[remote].sum()))  # per-row counts + neighbour ids
    return sent, received


def test_two_processes_sample_exactly_like_one_and_fetch_the_global_rows():
    results = comm.spawn(_sample_rank, 2, timeout=RUN_TIMEOUT, comm_timeout=20.0)
    g = _graph()
    ref = NeighborSampler(g, FANOUTS, threads=1)
    ref_replace = NeighborSampler(g, FANOUTS, replace=True, threads=1)
    feature_bytes = g.num_features * 4
    for rank, by_method in enumerate(results):
        for method, r in by_method.items():
            owner = r["owner"]
            expected = ref.sample(torch.from_numpy(r["seeds"]), seed=7)
            _same(r["own"], expected)
            assert torch.equal(r["own"].x, g.x[r["own"].n_id]) and torch.equal(r["own"].y, g.y[r["seeds"]])
            remote_rows = int((owner[r["own"].n_id.numpy()] != rank).sum())
            t = r["own_traffic"]
            assert remote_rows > 0 and t["remote_feature_rows"] == remote_rows
            assert t["local_feature_rows"] + remote_rows == r["own"].n_id.numel()
            assert t["feature_bytes_received"] == remote_rows * feature_bytes
            assert (t["sample_bytes_sent"], t["sample_bytes_received"]) == _expected_sample_bytes(expected, owner, rank)
            assert t["bytes_fetched"] == t["sample_bytes_received"] + t["feature_bytes_received"]

            routed = r["routed"]
            _same(routed, ref_replace.sample(torch.from_numpy(r["anywhere"]), seed=3))
            assert torch.equal(routed.x, g.x[routed.n_id]) and torch.equal(routed.y, g.y[r["anywhere"]])
            remote_seeds = int((owner[r["anywhere"]] != rank).sum())
            remote_rows = int((owner[routed.n_id.numpy()] != rank).sum())
            assert r["routed_traffic"]["feature_bytes_received"] == remote_rows * feature_bytes + remote_seeds * 8

            if rank == 0:
                assert r["lone"].batch_size == 0 and r["lone"].n_id.numel() == 0
                assert r["lone_traffic"]["sample_bytes_received"] == r["lone_traffic"]["feature_bytes_received"] == 0
            else:
                _same(r["lone"], ref.sample(r["lone"].output_nodes, seed=1))
            assert f"rank {rank} got 3 seed node(s) it does not own" in r["foreign"], r["foreign"]
    # METIS keeps more neighbours at home than id ranges do
    remote = {m: sum(res[m]["own_traffic"]["remote_sampled_nodes"] for res in results) for m in ("metis", "range")}
    assert remote["metis"] < remote["range"]


# A rank that dies mid-sampling: the survivor must fail fast with a clear error. comm.spawn
# kills everyone as soon as one rank dies, so this test runs its own processes.
def _dying_sampler(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    start = time.monotonic()
    try:
        comm.init("gloo", rank=rank, world_size=2, master_addr="127.0.0.1", master_port=port, timeout=5.0)
        dg = DistGraph.from_graph(_graph(), method="range")
        sampler = DistNeighborSampler(dg, FANOUTS)
        for step in range(6):
            if rank == 1 and step == 2:
                os._exit(3)  # crash without any goodbye
            sampler.sample(dg.nodes[step * 10:(step + 1) * 10], seed=step)
        outcome = "finished"
    except Exception as exc:  # noqa: BLE001 -- the test inspects it
        outcome = f"{type(exc).__name__}: {exc}"
    Path(out_dir, f"rank{rank}").write_text(f"{time.monotonic() - start:.2f}\n{outcome}")
    os._exit(0)


def test_a_rank_dying_mid_sampling_makes_the_other_fail_within_the_timeout(tmp_path):
    ctx = mp.get_context("spawn")
    port = comm._free_port()
    procs = [ctx.Process(target=_dying_sampler, args=(r, port, str(tmp_path))) for r in range(2)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + RUN_TIMEOUT
    for p in procs:
        p.join(max(0.1, deadline - time.monotonic()))
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(5)
    assert not hung, f"rank(s) {hung} hung instead of failing"
    assert procs[1].exitcode == 3
    seconds, outcome = (tmp_path / "rank0").read_text().split("\n", 1)
    assert outcome.startswith("CommError: DistNeighborSampler on rank 0 of 2: the "), outcome
    assert "exchange failed; a peer rank died or stopped sampling" in outcome, outcome
    assert float(seconds) < 20.0  # start-up + 2 batches + at most one 5 s comm timeout


def test_sampler_needs_one_part_per_process_under_comm_init():
    with pytest.raises(ConfigError, match="num_parts=3 but 1 processes run"):
        comm.init("gloo", rank=0, world_size=1, timeout=10.0)
        try:
            DistGraph.from_graph(_graph(), num_parts=3)
        finally:
            comm.shutdown()
