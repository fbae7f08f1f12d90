"""Partitioned propagation (sgl.ops.partition, sgl.ops.dist_propagate).

Single-process tests check the partitions, the halo plans, save/load and the errors; the
multi-process tests run 2 Gloo processes on 127.0.0.1 through ``comm.spawn`` with hard timeouts.
One spawned run checks every graph, split and operator at once (starting processes dominates
the cost); the dead-rank test runs its own processes so the survivor can report what it saw.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest
import torch

import sgl.comm as comm
from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError, StoreError
from sgl.ops import (
    GraphPartition, NormalizedAdjacency, dist_propagate_hops, gather_hops, local_partition, partition_assignment,
    partition_graph, propagate_hops,
)

RUN_TIMEOUT = 60.0


def _undirected(n: int = 30, isolated: int = 4) -> Graph:
    """A symmetric graph whose last ``isolated`` nodes have no edges."""
    gen = torch.Generator().manual_seed(1)
    e = torch.randint(0, n - isolated, (2, 70), generator=gen)
    e = e[:, e[0] != e[1]]
    return Graph.from_edge_index(torch.cat([e, e.flip(0)], 1), num_nodes=n, x=torch.randn(n, 6, generator=gen))


def _directed(n: int = 25) -> Graph:
    """Directed, weighted, with self loops and repeated edges."""
    gen = torch.Generator().manual_seed(2)
    e = torch.randint(0, n, (2, 90), generator=gen)
    return Graph.from_edge_index(e, num_nodes=n, edge_weight=torch.rand(90, generator=gen) + 0.05,
                                 x=torch.randn(n, 5, generator=gen, dtype=torch.float64))


# ------------------------------------------------------------------ single process
@pytest.mark.parametrize("method", ["range", "metis"])
def test_pieces_cover_the_graph_and_plans_agree(method: str) -> None:
    graph = _directed()
    parts = partition_graph(graph, 3, method, seed=0)
    owner = partition_assignment(graph, 3, method, seed=0)
    assert torch.equal(torch.sort(torch.cat([p.nodes for p in parts])).values, torch.arange(graph.num_nodes))
    crossing = int((owner[graph.indices] != owner[graph.destinations()]).sum())
    assert sum(p.cut_edges for p in parts) == crossing
    for p in parts:
        assert torch.equal(owner[p.nodes], torch.full_like(p.nodes, p.rank))
        assert torch.equal(p.x, graph.x[p.nodes])
        rows = torch.repeat_interleave(p.nodes, p.indptr[1:] - p.indptr[:-1])
        ours = sorted(zip(rows.tolist(), p.indices.tolist(), p.edge_weight.tolist()))
        mask = owner[graph.destinations()] == p.rank
        theirs = sorted(zip(graph.destinations()[mask].tolist(), graph.indices[mask].tolist(),
                            graph.edge_weight[mask].tolist()))
        assert ours == theirs
        # each halo row once; owner q sends exactly what p reads from it
        remote = p.indices[owner[p.indices] != p.rank]
        assert p.halo_size == torch.unique(remote).numel() <= p.cut_edges
        for q, ids in enumerate(p.recv_ids):
            assert torch.equal(ids, parts[q].nodes[parts[q].send_local[p.rank]])
            assert bool((owner[ids] == q).all())
        halo = torch.cat([p.nodes] + p.recv_ids)
        assert torch.equal(halo[p.local_columns()], p.indices)
    assert torch.equal(local_partition(graph, 1, 3, method).indices, parts[1].indices)


def test_range_split_is_contiguous_and_metis_cuts_less() -> None:
    graph = _undirected()
    assert partition_assignment(graph, 3, "range").tolist() == [0] * 10 + [1] * 10 + [2] * 10
    two = Graph.from_edge_index(torch.tensor([[0, 2, 1, 3, 0, 1], [2, 0, 3, 1, 1, 0]]))  # range cuts 4 of 6
    assert sum(p.cut_edges for p in partition_graph(two, 2, "metis")) < sum(
        p.cut_edges for p in partition_graph(two, 2, "range"))


def test_metis_empty_part_gets_a_node(monkeypatch: pytest.MonkeyPatch) -> None:
    import pymetis

    monkeypatch.setattr(pymetis, "part_graph", lambda parts, adjacency, options=None: (0, [0, 0, 0, 2, 2]))
    parts = partition_assignment(Graph.from_edge_index(torch.tensor([[0], [1]]), num_nodes=5), 3, "metis")
    assert sorted(torch.bincount(parts, minlength=3).tolist()) == [1, 2, 2]


@pytest.mark.parametrize("op", ["adj", "mean", "rw", "lazy", NormalizedAdjacency(r=0.5, self_loops=False)])
def test_one_process_world_is_exactly_propagate_hops(op, tmp_path: Path) -> None:
    graph = _directed()
    out = dist_propagate_hops(local_partition(graph, 0, 1), k=3, op=op, out_dir=tmp_path)
    ref = propagate_hops(graph, graph.x, 3, op)
    assert len(out.hops) == 4 and all(torch.equal(a, b) for a, b in zip(out.hops, ref))
    assert out.stats.bytes_sent == [0, 0, 0] and out.stats.cut_edges == 0
    assert [p.name for p in out.paths] == ["nodes.pt", "hop0.pt", "hop1.pt", "hop2.pt", "hop3.pt"]
    assert torch.equal(torch.load(tmp_path / "rank0" / "hop3.pt"), ref[3])
    assert all(torch.equal(a, b) for a, b in zip(gather_hops(out), ref))


@pytest.mark.parametrize("op", ["adj", "rw", "lazy", "heat", "ppr"])
def test_halo_path_in_one_process_matches(op, monkeypatch: pytest.MonkeyPatch) -> None:
    """The exchange path (what CUDA features take in a one-process world) without any peer."""
    import sgl.ops.dist_propagate as dp

    monkeypatch.setattr(dp, "_reference_path", lambda world, x: False)
    graph = _directed()
    out = dist_propagate_hops(local_partition(graph, 0, 1), k=3, op=op)
    for a, b in zip(out.hops, propagate_hops(graph, graph.x, 3, op)):
        assert torch.allclose(a, b, rtol=0, atol=1e-10)
    assert out.stats.bytes_received == [0, 0, 0] and out.stats.halo_rows == [0, 0, 0]


def test_save_load_round_trip_and_bad_files(tmp_path: Path) -> None:
    graph = _undirected()
    parts = partition_graph(graph, 3, "metis")
    paths = [p.save(tmp_path) for p in parts]
    assert [p.name for p in paths] == ["rank0.pt", "rank1.pt", "rank2.pt"]
    back = GraphPartition.load(tmp_path, 2, world_size=3)
    assert back.method == "metis" and torch.equal(back.x, parts[2].x)
    assert all(torch.equal(a, b) for a, b in zip(back.recv_ids, parts[2].recv_ids))
    with pytest.raises(ConfigError, match="split for 3 processes, but the world has 2"):
        GraphPartition.load(tmp_path, 0, world_size=2)
    with pytest.raises(StoreError, match=r"no partition file .*rank5\.pt.*rank0\.pt"):
        GraphPartition.load(tmp_path, 5)
    (tmp_path / "rank1.pt").write_bytes(paths[1].read_bytes()[:100])
    with pytest.raises(StoreError, match="unreadable"):
        GraphPartition.load(tmp_path, 1)
    # a piece of a 3-way split in a one-process world
    with pytest.raises(ConfigError, match="rank 2 of 3, but the world has one process"):
        dist_propagate_hops(back, k=2)


def test_bad_input() -> None:
    tiny = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 1))
    with pytest.raises(ConfigError, match="graph of 2 nodes over 3 processes"):
        local_partition(tiny, 0, 3)
    with pytest.raises(ConfigError, match="graph of 2 nodes over 3 processes"):
        partition_graph(tiny, 3, "range")
    with pytest.raises(ConfigError, match=r"rank must be an integer in \[0, 2\)"):
        local_partition(tiny, 2, 2)
    with pytest.raises(ConfigError, match="unknown partition method"):
        partition_graph(tiny, 1, "random")
    with pytest.raises(ConfigError, match="one part per node"):
        partition_graph(tiny, 2, assignment=[0, 1, 1])
    with pytest.raises(ConfigError, match=r"must be in \[0, 2\)"):
        partition_graph(tiny, 2, assignment=[0, 2])
    piece = local_partition(Graph.from_edge_index(torch.tensor([[0], [1]])), 0, 1)
    with pytest.raises(FeatureError, match="no feature rows"):
        dist_propagate_hops(piece, k=1)
    with pytest.raises(FeatureError, match="2 nodes"):
        dist_propagate_hops(piece, k=1, x=torch.ones(3, 2))
    with pytest.raises(ConfigError, match="non-negative"):
        dist_propagate_hops(local_partition(tiny, 0, 1), k=-1)
    with pytest.raises(ConfigError, match="GraphPartition"):
        dist_propagate_hops(tiny, k=1)


# ------------------------------------------------------------------ two processes
CASES = [("undirected", "range", "adj"), ("undirected", "metis", "adj"), ("undirected", "metis", "mean"),
         ("directed", "range", "adj"), ("directed", "metis", "rw"), ("directed", "range", "lazy"),
         ("directed", "metis", "noloops"), ("undirected", "range", "ppr")]


def _op(name: str):
    return NormalizedAdjacency(r=0.5, self_loops=False) if name == "noloops" else name


def _two_rank_worker(rank: int, world: int, out_dir: str) -> dict:
    torch.set_num_threads(1)
    graphs = {"undirected": _undirected(), "directed": _directed()}
    results = {}
    for gname, method, op in CASES:
        part = local_partition(graphs[gname], rank, world, method)
        out = dist_propagate_hops(part, k=3, op=_op(op), out_dir=Path(out_dir) / f"{gname}-{method}-{op}",
                                  timeout=20)
        results[gname, method, op] = (gather_hops(out), out.stats, part.halo_size, [p.name for p in out.paths])
    errors = {}
    # pieces of different splits on the two ranks; then a piece of a 3-way split
    for what, piece in (("mixed", local_partition(graphs["undirected"], rank, 2, ("range", "metis")[rank])),
                        ("world3", partition_graph(graphs["undirected"], 3, "range")[rank])):
        try:
            dist_propagate_hops(piece, k=2, timeout=20)
            errors[what] = "no error"
        except ConfigError as exc:
            errors[what] = str(exc)
    return {"results": results, "errors": errors}


def test_two_processes_match_single_process(tmp_path: Path) -> None:
    out = comm.spawn(_two_rank_worker, 2, str(tmp_path), timeout=RUN_TIMEOUT, comm_timeout=20.0)
    graphs = {"undirected": _undirected(), "directed": _directed()}
    for gname, method, op in CASES:
        graph = graphs[gname]
        ref = propagate_hops(graph, graph.x, 3, _op(op))
        for rank in range(2):
            hops, stats, halo, names = out[rank]["results"][gname, method, op]
            assert len(hops) == 4
            for a, b in zip(hops, ref):
                assert torch.allclose(a, b, rtol=0, atol=1e-6), (gname, method, op, float((a - b).abs().max()))
            d, item = graph.x.shape[1], graph.x.element_size()
            assert stats.bytes_received == [r * d * item for r in stats.halo_rows], (gname, method, op)
            if op != "ppr":  # one exchange per hop; PPR exchanges once per iteration
                assert stats.halo_rows == [halo] * 3
            assert stats.cut_edges >= halo
            assert names == ["nodes.pt", "hop0.pt", "hop1.pt", "hop2.pt", "hop3.pt"]
            saved = tmp_path / f"{gname}-{method}-{op}" / f"rank{rank}"
            nodes = torch.load(saved / "nodes.pt")
            assert torch.allclose(torch.load(saved / "hop3.pt"), ref[3][nodes], rtol=0, atol=1e-6)
        # what one rank sends the other receives
        sent, received = (out[r]["results"][gname, method, op][1] for r in range(2))
        assert sent.bytes_sent == received.bytes_received
    for rank in range(2):
        mixed = out[rank]["errors"]["mixed"]
        assert "halo plans of the pieces do not match" in mixed or "come from different partitions" in mixed, mixed
        assert "split for [3] processes but the world has 2" in out[rank]["errors"]["world3"]


def _dying_child(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    start = time.monotonic()
    try:
        comm.init("gloo", rank=rank, world_size=2, master_addr="127.0.0.1", master_port=port, timeout=8.0)
        if rank == 1:
            real, calls = comm.all_to_all, [0]

            def dying(*args, **kwargs):
                calls[0] += 1
                if calls[0] == 4:  # setup ids, degrees, hop 1, then dies in hop 2
                    os._exit(3)
                return real(*args, **kwargs)

            comm.all_to_all = dying
        dist_propagate_hops(local_partition(_undirected(), rank, 2, "range"), k=3)
        outcome = "finished"
    except Exception as exc:  # noqa: BLE001 -- the test inspects it
        outcome = f"{type(exc).__name__}: {exc}"
    Path(out_dir, f"rank{rank}").write_text(f"{time.monotonic() - start:.2f}\n{outcome}")
    os._exit(0)


def test_dead_rank_makes_the_other_fail_fast(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    port = comm._free_port()
    procs = [ctx.Process(target=_dying_child, args=(r, port, str(tmp_path))) for r in range(2)]
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
    assert not hung, f"ranks {hung} hung instead of failing"
    assert procs[1].exitcode == 3
    seconds, outcome = (tmp_path / "rank0").read_text().split("\n", 1)
    assert outcome.startswith("CommError: dist_propagate_hops: the halo exchange of hop 2 failed on rank 0/2"), outcome
    assert "a peer rank probably died" in outcome
    assert float(seconds) < 30.0  # start-up + at most one 8 s comm timeout
