"""Split learning with parties as threads over in-process channels (the same protocol and byte
counts as processes): equality with centralised training, CELU-VFL, Rake, alignment, failures.
The two-process runs are in test_processes.py."""
import threading
import time

import numpy as np
import pytest
import torch

from sgl.datasets.ctr import make_synthetic_ctr
from sgl.errors import CommError, ConfigError
from sgl.federated import (
    FederatedConfig, FieldSplit, LocalChannel, SplitParty, default_split, party_views, rake_attack,
    train_centralised, train_federated,
)
from sgl.federated.models import out_fields

from .conftest import TOY_SPLIT, separable_toy


@pytest.fixture(scope="module")
def tables():
    return make_synthetic_ctr(700, [30, 30, 30, 30], num_dense=2, seed=0).split()


@pytest.mark.parametrize("model, parties", [("wdl", 2), ("deepfm", 2), ("dlrm", 3)])
def test_split_learning_equals_centralised_training(tables, model, parties):
    train, val, test = tables
    split = default_split(train, parties)
    config = FederatedConfig(model=model, embed_dim=4, hidden=[8], bottom_hidden=[8] if parties == 3 else [],
                             batch_size=64, max_steps=6, lr=0.01)
    reference = train_centralised(train, split, config)
    result = train_federated(train, val, test, split, config, backend="thread")
    np.testing.assert_allclose(result["losses"], reference, atol=1e-5, rtol=0)
    assert len(set(np.round(reference, 4))) > 1  # the loss moves: the test compares training, not init
    per_round = result["traffic"]["bytes_received"] / 6
    assert per_round > 0 and result["traffic"]["rounds"] == 6
    assert result["traffic"]["link_seconds"] >= 6 * 2 * 0.010  # two 10 ms messages per round


def test_celu_with_zero_local_steps_equals_vanilla_and_local_steps_cut_nothing_on_the_wire(tables):
    train, val, test = tables
    split = default_split(train)
    base = dict(embed_dim=4, hidden=[8], batch_size=64, max_steps=6, lr=0.01)
    vanilla = train_federated(train, val, test, split, FederatedConfig(**base), backend="thread")
    zero = train_federated(train, val, test, split, FederatedConfig(**base, local_steps=0, workset=2, max_uses=2,
                                                                    xi=0.0), backend="thread")
    assert zero["losses"] == vanilla["losses"]
    celu = train_federated(train, val, test, split, FederatedConfig(**base, local_steps=3), backend="thread")
    assert celu["local_steps"] > 0 and celu["losses"][1:] != vanilla["losses"][1:]
    assert celu["traffic"]["bytes_sent"] == vanilla["traffic"]["bytes_sent"]  # caches stay local
    assert celu["losses"][0] == vanilla["losses"][0]


def test_rake_bottoms_differ_task_trains_and_stealing_gets_harder():
    train, val, test = separable_toy().split((0.6, 0.2, 0.2))
    split = FieldSplit(TOY_SPLIT)
    out = {}
    for rake in (False, True):
        config = FederatedConfig(embed_dim=4, hidden=[8], bottom_hidden=[16], batch_size=64, epochs=3, lr=0.01,
                                 rake=rake, rake_weight=1.0, observe=300)
        result = train_federated(train, val, test, split, config, backend="thread")
        host_train, host_test = split.views(train)[1], split.views(test)[1]
        seen = result["observed"][1]
        out[rake] = (result["test_auc"], rake_attack(host_train.rows(np.arange(300)), seen["aux"], host_test,
                                                     seen["test"], 4, [16], epochs=30))
    assert out[False][0] > 0.95 and out[True][0] > 0.95  # the task still trains
    assert out[True][1]["surrogate_error"] > 10 * out[False][1]["surrogate_error"]
    assert out[True][1]["surrogate_error"] > 0.3


def test_rake_two_bottom_models_differ():
    train, val, _ = separable_toy(300).split((0.8, 0.1, 0.1))
    split = FieldSplit(TOY_SPLIT)
    views = party_views(split, train, val, val)
    config = FederatedConfig(embed_dim=4, bottom_hidden=[8], rake=True, rake_weight=1.0, batch_size=60, epochs=2)
    channels = LocalChannel.pair()
    parties = [SplitParty(r, 2, views[r], out_fields([v["train"] for v in views]), config, channels[r])
               for r in range(2)]
    host = parties[1]
    t = threading.Thread(target=parties[1].train)
    t.start()
    parties[0].train()
    t.join()
    dense = torch.as_tensor(views[1]["val"].dense)
    ids = torch.as_tensor(views[1]["val"].sparse)
    with torch.no_grad():
        f1, f2 = host.bottoms[0](dense, ids), host.bottoms[1](dense, ids)
    cos = torch.nn.functional.cosine_similarity(f1.flatten(1), f2.flatten(1), dim=1)
    assert float(cos.mean()) < 0.2 and not torch.allclose(f1, f2)


def test_misaligned_ids_fail_in_the_harness_and_in_the_parties(tables):
    train, val, test = tables
    split = default_split(train)
    shuffled = [np.arange(len(train)), np.roll(np.arange(len(train)), 1)]
    config = FederatedConfig(embed_dim=4, hidden=[8], max_steps=1)
    with pytest.raises(ConfigError, match="do not align"):
        train_federated(train, val, test, split, config, sample_ids=shuffled, backend="thread")
    views = party_views(split, train, val, test, shuffled)
    channels = LocalChannel.pair(timeout=5)
    parties = [SplitParty(r, 2, views[r], out_fields([v["train"] for v in views]), config, channels[r])
               for r in range(2)]
    errors = []
    t = threading.Thread(target=lambda: errors.append(pytest.raises(ConfigError, parties[1].check_alignment)))
    t.start()
    with pytest.raises(ConfigError, match="row 0 holds id"):
        parties[0].check_alignment()
    t.join()
    assert errors and "active party" in str(errors[0].value)


def test_a_dead_party_makes_the_other_fail_within_the_timeout(tables):
    train, val, test = tables
    split = default_split(train)
    views = party_views(split, train, val, test)
    config = FederatedConfig(embed_dim=4, hidden=[8], batch_size=64, max_steps=50)
    channels = LocalChannel.pair(timeout=0.5)
    parties = [SplitParty(r, 2, views[r], out_fields([v["train"] for v in views]), config, channels[r])
               for r in range(2)]

    def host_dies_after_two_rounds():
        parties[1].check_alignment()
        for step in range(2):
            parties[1].train_step(step, np.arange(64))

    t = threading.Thread(target=host_dies_after_two_rounds)
    t.start()
    start = time.perf_counter()
    with pytest.raises(CommError, match="timed out"):
        parties[0].train()
    assert time.perf_counter() - start < 5
    t.join()


def test_config_errors():
    with pytest.raises(ConfigError, match="needs sumkl_bound"):
        FederatedConfig(defense="projpert-iso")
    with pytest.raises(ConfigError, match="takes no sumkl_bound"):
        FederatedConfig(defense="none", sumkl_bound=1.0)
    with pytest.raises(ConfigError, match="model must be"):
        FederatedConfig(model="gbdt")
    with pytest.raises(ConfigError, match="no defense"):
        train_centralised(None, None, FederatedConfig(local_steps=1))
