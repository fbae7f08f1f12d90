"""Out-of-core batches and cache policies (sgl.samplers.outofcore), without the training loop."""
import numpy as np
import pytest
import torch

import sgl
from sgl.errors import ConfigError
from sgl.samplers import open_store, write_store
from sgl.samplers.caches import BeladyFeatureCache
from sgl.samplers.outofcore import (METHODS, POLICIES, GinexPolicy, LRUPolicy, OUTREPolicy, OutOfCorePolicy,
                                    OutOfCoreSampling, make_policy, needed_positions, policy_class, random_batches,
                                    superbatches)


@pytest.fixture(scope="module")
def karate_store(tmp_path_factory):
    return open_store(write_store(sgl.datasets.load("karate"), tmp_path_factory.mktemp("store") / "karate"))


def test_registry_maps_each_method_to_its_policy():
    assert METHODS == ("lru", "ginex", "outre")
    assert [POLICIES[m] for m in METHODS] == [LRUPolicy, GinexPolicy, OUTREPolicy]
    assert all(issubclass(cls, OutOfCorePolicy) and cls.name == m for m, cls in POLICIES.items())
    with pytest.raises(ConfigError, match="unknown out-of-core method 'belady'; choose one of lru, ginex, outre"):
        policy_class("belady")


@pytest.mark.parametrize("bad,match", [({"method": "belady"}, "unknown out-of-core method"),
                                       ({"staleness": 0}, "staleness must be a positive integer, got 0"),
                                       ({"group_csr": 1}, "group_csr must be true or false, got 1"),
                                       ({"neighbor_cache_fraction": 1.0}, r"must be in \[0, 1\), got 1.0"),
                                       ({"superbatch": -1}, "superbatch must be >= 0 batches, got -1"),
                                       ({"method": "lru", "feature_cache": "belady"}, "always uses its own cache: LRU"),
                                       ({"method": "ginex", "feature_cache": "belady"}, "own cache: Belady"),
                                       ({"feature_cache": "belady", "group_csr": True}, "per-group CSR")])
def test_sampling_options_are_checked_by_the_config_and_the_policy(bad, match):
    with pytest.raises(ConfigError, match=match):
        OutOfCoreSampling(**bad)


def test_random_batches_cover_the_training_nodes_once_per_epoch():
    nodes = np.arange(100, 137)
    a, b = (random_batches(nodes, 10, seed=0, epoch=e) for e in (0, 1))
    assert [x.size for x in a] == [10, 10, 10, 7]
    assert sorted(np.concatenate(a).tolist()) == nodes.tolist() == sorted(np.concatenate(b).tolist())
    assert not np.array_equal(np.concatenate(a), np.concatenate(b))
    np.testing.assert_array_equal(np.concatenate(a), np.concatenate(random_batches(nodes, 10, seed=0, epoch=0)))


def test_superbatches_keep_their_plan_within_its_room(karate_store):
    policy = make_policy(OutOfCoreSampling(method="ginex", fanouts=[3, 3], memory_budget="1MB"), batch_size=2, seed=0)
    policy.prepare(karate_store, np.arange(karate_store.num_nodes), width=8)
    seeds = policy.batches(0)
    room = 40 * BeladyFeatureCache.PLAN_BYTES_PER_ID
    chunks = list(superbatches(seeds, lambda i, s: policy.sample(s, 0, i, i), limit=len(seeds), plan_room=room))
    assert sum(len(c) for c in chunks) == len(seeds) and len(chunks) > 1
    for chunk in chunks:
        plan = sum(t.size for _, t in chunk) * BeladyFeatureCache.PLAN_BYTES_PER_ID
        assert len(chunk) == 1 or plan <= room
        for batch, trace in chunk:
            np.testing.assert_array_equal(trace, batch.n_id.numpy()[needed_positions(batch)])


@pytest.mark.parametrize("method", METHODS)
def test_a_policy_serves_an_epoch_through_its_caches_within_the_budget(karate_store, method):
    extra = {"num_parts": 2, "group_size": 1} if method == "outre" else {}
    policy = make_policy(OutOfCoreSampling(method=method, fanouts=[3, 3], memory_budget="1MB", **extra),
                         batch_size=4, seed=0)
    train = np.flatnonzero(karate_store.train_mask.numpy())
    prep = policy.prepare(karate_store, train, width=8)
    assert isinstance(prep, dict) and policy.cache is not None
    seen = []
    for iteration, batch in enumerate(policy.epoch(0, first_iteration=0)):
        needed, rows, history = policy.gather(batch)
        assert rows.shape == (needed.size, karate_store.num_features)
        np.testing.assert_array_equal(rows.numpy(), policy.features.read(batch.n_id[needed]).numpy())
        policy.finish_step(batch, torch.zeros(batch.computed_inputs.size, 8), iteration, rows.numel() * 4)
        seen.append(batch.output_nodes.numpy())
    assert sorted(np.concatenate(seen).tolist()) == sorted(train.tolist())
    assert policy.budget.peak <= policy.budget.total


def test_the_loop_moved_to_tasks_with_a_clear_pointer():
    import sgl.samplers
    from sgl.tasks import OutOfCoreTrainer

    assert OutOfCoreTrainer.__module__ == "sgl.tasks.outofcore"
    with pytest.raises(AttributeError, match=r"moved to sgl.tasks.OutOfCoreTrainer"):
        sgl.samplers.OutOfCoreTrainer
