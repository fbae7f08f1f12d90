"""2-process runs (one spawn for every variant, to keep the suite fast): the all-to-all round trip,
EP / padded / expert-data-parallel / NetMoE / LSH / FSEP training against 1-process training."""
from __future__ import annotations

import time
from dataclasses import replace

import pytest
import torch

import sgl.comm as comm
from sgl.errors import CommError
from sgl.systems.moe import all_to_all_autograd
from sgl.systems.moe.train import train_moe_lm
from tests.systems.moe.helpers import MOE, TIMEOUT, spec

#: token dropping: capacity 0.75 * tokens * k / E per (group, expert); groups = ranks by default
CAP = replace(MOE, capacity_factor=0.75)

#: FSEP layouts, one per step: replicas (expert 2 twice in step 3), uneven slot counts
LAYOUTS = [[[0, 1, 2], [3]], [[1, 3], [0, 2]], [[0, 1, 2, 3], [2]]]
VARIANTS = {
    "ep": dict(dispatch="ep"),
    "padded": dict(dispatch="padded"),
    "edp": dict(dispatch="ep", ep_size=1),
    # Random tokens have no sample affinity: without the residual term in the objective samples move.
    "netmoe-1node": dict(dispatch="ep", placement="netmoe", nodes=1, netmoe_count_residual=False),
    "netmoe-2nodes": dict(dispatch="ep", placement="netmoe", nodes=2, netmoe_count_residual=False),
    "netmoe-refine": dict(dispatch="ep", placement="netmoe", nodes=2, netmoe_count_residual=False, netmoe_refine=16),
    "lsh": dict(dispatch="lsh", lsh_hashes=1),
    "fsep": dict(dispatch="fsep", fsep_layouts=LAYOUTS),
    "fsep-laer": dict(dispatch="fsep", balance="laer"),
    "kmeans-full": dict(dispatch="kmeans", kmeans_rate=1.0),  # every row its own centroid
    "ep-cap": dict(dispatch="ep", moe=CAP),  # capacity per expert per rank (the default)
    "ep-cap-g2": dict(dispatch="ep", moe=replace(CAP, capacity_groups=2)),
    "padded-cap": dict(dispatch="padded", moe=CAP),
    "fsep-cap": dict(dispatch="fsep", moe=CAP, fsep_layouts=LAYOUTS),
}


def _round_trip(rank: int) -> tuple[bool, bool, int]:
    gen = torch.Generator().manual_seed(rank)
    splits = [rank + 1, 3 - rank]  # uneven, different on each rank
    x = torch.randn(sum(splits), 5, generator=gen, requires_grad=True)
    recv_counts = comm.all_to_all(torch.tensor(splits))
    there = all_to_all_autograd(x, splits, recv_counts.tolist())
    back = all_to_all_autograd(there * 2.0, recv_counts.tolist(), splits)
    back.sum().backward()
    return torch.equal(back, 2 * x.detach()), torch.equal(x.grad, torch.full_like(x, 2.0)), there.shape[0]


def _all_variants(rank: int, world: int) -> dict:
    out = {"round_trip": _round_trip(rank)}
    for name, kw in VARIANTS.items():
        out[name] = train_moe_lm(rank, world, spec(**kw))
    return out


@pytest.fixture(scope="module")
def runs():
    # fork: the children share the imported torch (spawn re-imports it: ~10 s on a loaded 2-core box)
    return comm.spawn(_all_variants, 2, timeout=4 * TIMEOUT, start_method="fork")


@pytest.fixture(scope="module")
def reference():
    torch.manual_seed(0)
    return train_moe_lm(0, 1, spec(dispatch="local"))


@pytest.fixture(scope="module")
def reference_cap():
    """1 process, the same capacity per (group, expert) with the global batch cut into 2 groups."""
    torch.manual_seed(0)
    return train_moe_lm(0, 1, spec(dispatch="local", moe=replace(CAP, capacity_groups=2)))


@pytest.mark.parametrize("name", ["ep-cap", "ep-cap-g2", "padded-cap", "fsep-cap"])
def test_capacity_applies_per_expert_per_rank_like_its_single_process_definition(runs, reference_cap, name):
    dropped = [[a + b for a, b in zip(r0, r1)] for r0, r1 in zip(runs[0][name]["dropped"], runs[1][name]["dropped"])]
    assert dropped == reference_cap["dropped"]  # the same pairs dropped, step by step, layer by layer
    assert sum(map(sum, dropped)) > 0  # capacity really binds
    for r in runs:
        _same(reference_cap, r[name])


def test_one_global_capacity_group_is_a_different_definition(reference_cap):
    one = train_moe_lm(0, 1, spec(dispatch="local", moe=replace(CAP, capacity_groups=1)))
    assert one["dropped"] != reference_cap["dropped"]


def test_kmeans_at_full_rate_is_the_uncompressed_model(runs, reference):
    for r in runs:
        _same(reference, r["kmeans-full"])
        assert r["kmeans-full"]["sent_rows"] == r["kmeans-full"]["routed_rows"]


def test_dispatch_combine_round_trip_exact(runs):
    assert all(r["round_trip"][0] and r["round_trip"][1] for r in runs)
    assert [r["round_trip"][2] for r in runs] == [1 + 2, 3 + 2]  # rank 0 gets its 1 row + rank 1's 2


def _same(ref: dict, got: dict) -> None:
    assert got["loss"] == pytest.approx(ref["loss"], rel=1e-5)
    for g_ref, g in zip(ref["grads"], got["grads"]):
        assert g_ref.keys() == g.keys()
        for k in g_ref:
            assert torch.allclose(g_ref[k], g[k], atol=1e-5, rtol=1e-4), k


@pytest.mark.parametrize("name", ["ep", "padded", "edp"])
def test_two_process_training_equals_single_process(runs, reference, name):
    assert reference["loss"][0] != reference["loss"][-1]  # parameters moved between steps
    for r in runs:
        _same(reference, r[name])


@pytest.mark.parametrize("name", ["netmoe-1node", "netmoe-2nodes", "netmoe-refine"])
def test_netmoe_placement_never_changes_loss_or_gradients(runs, reference, name):
    assert sum(r[name]["moved_samples"] for r in runs) > 0  # samples really changed ranks
    for r in runs:
        _same(reference, r[name])


def test_fsep_equals_ep_with_a_layout_change_every_step(runs, reference):
    for r in runs:
        _same(reference, r["fsep"])
        _same(reference, r["fsep-laer"])
    assert runs[0]["fsep-laer"]["layout_changes"] == 2  # planned after steps 1 and 2, applied a step later


def test_lsh_compresses_the_dispatch_and_still_trains(runs, reference):
    for r in runs:
        assert r["lsh"]["sent_rows"] < r["lsh"]["routed_rows"]
        assert r["lsh"]["loss"][0] == pytest.approx(reference["loss"][0], rel=0.05)
        assert r["lsh"]["loss"] != reference["loss"]  # compression is not a no-op
    assert runs[0]["padded"]["sent_rows"] >= runs[0]["ep"]["sent_rows"]


def _dies(rank, world, s):
    if rank == 1:
        import os

        os._exit(3)  # dies before its first all-to-all
    return train_moe_lm(rank, world, s)


def test_dead_rank_fails_the_other_within_timeout():
    t0 = time.monotonic()
    with pytest.raises(CommError):
        comm.spawn(_dies, 2, spec(timeout=2.0), timeout=20.0, comm_timeout=2.0, start_method="fork")
    assert time.monotonic() - t0 < 20.0
