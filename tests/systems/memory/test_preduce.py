"""Partial-reduce over a real TCPStore: converges, groups never repeat a worker, P > world refused."""
import json
import os
import threading

import pytest
import torch
from torch.distributed import TCPStore

from sgl import comm
from sgl.errors import ConfigError
from sgl.systems.memory import PartialReduce, preduce_worker, regression_problem, staleness_weights, sync_worker


def _threads(world, P, steps, delays, connect_every=0):
    store = TCPStore("127.0.0.1", 0, world + 1, True, wait_for_workers=False)
    results = [None] * world

    def run(r):
        client = TCPStore("127.0.0.1", store.port, world + 1, False)
        results[r] = preduce_worker(r, world, P, steps, delays, store=client, connect_every=connect_every)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    groups, g = [], 0
    while store.check([f"preduce/m{g}"]):
        groups.append(json.loads(store.get(f"preduce/m{g}")))
        g += 1
    return results, groups


def _linked(groups, world):
    parent = list(range(world))

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    for members in groups:
        for r in members[1:]:
            parent[find(r)] = find(members[0])
    return len({find(r) for r in range(world)}) == 1


def test_partial_reduce_converges_and_groups_are_distinct_workers():
    results, _ = _threads(world=4, P=2, steps=30, delays=[0.0, 0.0, 0.0, 0.004])
    x, y = regression_problem(0)
    start = float((y ** 2).mean())
    for res in results:
        assert res["curve"][-1][1] < 0.01 * start
        for group in res["groups"]:
            assert len(group) == len(set(group))  # never a worker averaged with itself
    assert any(len(g) == 2 for g in results[0]["groups"])


def test_connecting_groups_link_every_worker_in_each_window():
    # Two fast and two slow workers: fast ones would keep pairing with each other.
    results, groups = _threads(world=4, P=2, steps=24, delays=[0.0, 0.0, 0.006, 0.006], connect_every=3)
    seen, first_done = [0] * 4, len(groups)
    for i, g in enumerate(groups):  # the group where some worker takes its last place
        for r in g:
            seen[r] += 1
        if max(seen) == 24:
            first_done = min(first_done, i)
    assert first_done >= 6
    for end in range(2, first_done, 3):  # group `end` is a connecting group, all workers still running
        assert _linked(groups[end - 2:end + 1], 4), groups[end - 2:end + 1]
    assert all(len(g) == len(set(g)) for g in groups)
    assert max(len(g) for g in groups) > 2  # a connecting group grew past P to link the islands
    x, y = regression_problem(0)
    # the fast workers finish their 24 steps with fewer averaged peers: they end at 0.6-0.9 % of the
    # start loss depending on thread timing, so 1 % would be flaky; 5 % still fails a run that diverges
    assert all(r["curve"][-1][1] < 0.05 * float((y ** 2).mean()) for r in results)


def test_staleness_weights_and_bad_group_size():
    w = staleness_weights([5, 4, 2])
    assert torch.isclose(w.sum(), torch.tensor(1.0)) and w[0] > w[1] > w[2]
    with pytest.raises(ConfigError, match="exceeds the world size"):
        PartialReduce(None, 0, 2, 3)
    with pytest.raises(ConfigError):
        PartialReduce(None, 0, 2, 0)


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="spawns 3 processes twice; SGL_SLOW_TESTS=1")
def test_partial_reduce_processes_beat_sync_with_one_slow_rank():
    delays = [0.01, 0.01, 0.02]
    pr = comm.spawn(preduce_worker, 3, 2, 40, delays, timeout=300)
    sync = comm.spawn(sync_worker, 3, 40, delays, timeout=300)
    x, y = regression_problem(0)
    target = 0.01 * float((y ** 2).mean())

    def time_to_target(curve):
        return next(t for t, loss in curve if loss <= target)

    # The fast ranks do not wait for the slow one: the target comes sooner than in lock-step.
    assert time_to_target(pr[0]["curve"]) < time_to_target(sync[0]["curve"])



def _both_transports(rank, world):
    import torch.distributed as dist
    from torch.distributed import PrefixStore

    base = dist.distributed_c10d._get_default_store()
    return [preduce_worker(rank, world, 2, 4, [0.0, 0.0], store=PrefixStore(name, base), transport=name)
            for name in ("group", "store")]


def test_two_processes_on_process_groups_equal_the_store_transport():
    # P = 2 of 2: every group is both ranks, so both transports average the same models
    for g, s in comm.spawn(_both_transports, 2, timeout=120):
        assert len(g["groups"]) == 4 and all(sorted(x) == [0, 1] for x in g["groups"] + s["groups"])
        torch.testing.assert_close(g["w"], s["w"], rtol=1e-6, atol=1e-7)
        assert [l for _, l in g["curve"]] == pytest.approx([l for _, l in s["curve"]], rel=1e-5)
    with pytest.raises(ConfigError, match="needs sgl.comm initialised"):
        PartialReduce(None, 0, 2, 2, transport="group")
    with pytest.raises(ConfigError, match="transport must be"):
        PartialReduce(None, 0, 2, 2, transport="tcp")
