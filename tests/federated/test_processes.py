"""Split learning with one Gloo process per party (sgl.comm.spawn): equality with centralised
training, the label-inference attacks on a separable toy, and a party that stops answering.

One spawned world runs every check (process start-up dominates on a busy 2-core machine).
"""
import time
from pathlib import Path

import numpy as np
import pytest

import sgl.comm as comm
from sgl.datasets.ctr import make_synthetic_ctr
from sgl.errors import CommError
from sgl.federated import (
    CommChannel, FederatedConfig, FieldSplit, SplitParty, attack_report, default_split, party_views,
    train_centralised,
)
from sgl.federated.models import out_fields

from .conftest import TOY_SPLIT, separable_toy

RUN_TIMEOUT = 120.0
EQUAL = FederatedConfig(embed_dim=4, hidden=[8], batch_size=64, max_steps=5, lr=0.01)
ATTACK = FederatedConfig(embed_dim=4, hidden=[8], batch_size=64, epochs=1, lr=0.01, attack=True)
HANG = FederatedConfig(embed_dim=4, hidden=[8], batch_size=64, max_steps=20, timeout=1.5)


def _tables():
    return make_synthetic_ctr(600, [30, 30, 30, 30], num_dense=2, seed=0).split()


def _party(rank, views, config):
    layout = out_fields([v["train"] for v in views])
    return SplitParty(rank, 2, views[rank], layout, config, CommChannel(timeout=config.timeout))


def _world(rank: int, world: int) -> dict:
    import torch

    torch.set_num_threads(1)
    train, val, test = _tables()
    out = {"equal": _party(rank, party_views(default_split(train), train, val, test), EQUAL).train()}
    toy = separable_toy().split((0.6, 0.2, 0.2))
    out["attack"] = _party(rank, party_views(FieldSplit(TOY_SPLIT), *toy), ATTACK).train()
    party = _party(rank, party_views(default_split(train), train, val, test), HANG)
    party.check_alignment()
    if rank == 1:  # the host stops answering (a dead machine behind a WAN looks like this)
        time.sleep(HANG.timeout + 1.5)
        return out
    start = time.perf_counter()
    try:
        party.train_step(0, np.arange(64))
    except CommError as exc:
        out["hang"] = (time.perf_counter() - start, str(exc))
    return out


@pytest.fixture(scope="module")
def world():
    # the children import this module by name (tests.federated...): give them the repository root,
    # as `python -m pytest` would
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(Path(__file__).resolve().parents[2]))
        return comm.spawn(_world, 2, timeout=RUN_TIMEOUT)


def test_two_processes_equal_centralised_training(world):
    train, _, _ = _tables()
    reference = train_centralised(train, default_split(train), EQUAL)
    np.testing.assert_allclose(world[0]["equal"]["losses"], reference, atol=1e-5, rtol=0)
    traffic = world[1]["equal"]["traffic"]
    assert traffic["rounds"] == 5 and traffic["bytes_sent"] == world[0]["equal"]["traffic"]["bytes_received"]


def test_attacks_reach_high_auc_without_defense(world):
    train = separable_toy().split((0.6, 0.2, 0.2))[0]
    report = attack_report(world[1]["attack"], train.labels)
    assert report["batches"] >= 5
    assert report["norm_auc"] > 0.9 and report["direction_auc"] > 0.9


def test_a_party_that_stops_answering_fails_the_other_within_the_timeout(world):
    seconds, message = world[0]["hang"]
    assert seconds < HANG.timeout + 2.0
    assert "recv" in message and "rank 1" in message
