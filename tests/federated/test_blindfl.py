"""BlindFL's source layer: encrypted forward/backward equal the plaintext layer (1024-bit keys)."""
import os
import sys
import threading

import numpy as np
import pytest
import torch

from sgl.errors import ConfigError
from sgl.federated.channel import LocalChannel
from sgl.federated.paillier import generate_keypair, pack, to_ring, truncate_shares, unpack

S = 2.0 ** 16
#: rows per step (two steps): a few hundred rows under SGL_SLOW_TESTS, fewer by default (~2 s)
ROWS = 150 if os.environ.get("SGL_SLOW_TESTS") else 40


def test_key_size_below_1024_is_refused():
    with pytest.raises(ConfigError, match=">= 1024"):
        generate_keypair(512)


def test_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "phe", None)
    with pytest.raises(ConfigError, match=r"sgl\[federated\]"):
        generate_keypair(1024)


def test_packing_and_ring_helpers():
    values = [0, 1, 2 ** 2047 + 12345]
    packed = pack(values, 256)
    assert packed.dtype == torch.uint8 and packed.shape == (3, 256)
    assert unpack(packed) == values
    assert to_ring([2 ** 63, -(2 ** 63) - 1]).tolist() == [-(2 ** 63), 2 ** 63 - 1]
    rng = np.random.default_rng(0)
    x = rng.integers(-2 ** 40, 2 ** 40, 1000)
    a = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, 1000, dtype=np.int64, endpoint=True)
    ta, tb = truncate_shares(a, x - a, 16)
    assert np.abs((ta + tb) - (x >> 16)).max() <= 1


def test_encrypted_layer_equals_plaintext_within_fixed_point_error():
    pytest.importorskip("phe")
    from sgl.federated.blindfl import BlindSourceFeatureSide, BlindSourceLabelSide

    rng = np.random.default_rng(0)
    num_rows, k, lr = 7, 2, 0.5  # 5 categorical ids + 2 dense columns
    batches = []
    for _ in range(2):  # two steps
        rows = np.stack([rng.integers(0, 5, ROWS), np.full(ROWS, 5), np.full(ROWS, 6)], 1)
        coef = np.stack([np.ones(ROWS), rng.normal(size=ROWS), rng.normal(size=ROWS)], 1)
        batches.append((rows, coef))
    a, b = LocalChannel.pair(timeout=120)
    box = {}

    def feature_side():
        layer = BlindSourceFeatureSide(a, peer=1, num_rows=num_rows, embed_dim=k, seed=0)
        box["U0"] = layer.weight_share()
        for rows, coef in batches:
            layer.forward(rows, coef)
            layer.backward(lr)
        box["U"] = layer.weight_share()

    t = threading.Thread(target=feature_side)
    t.start()
    label = BlindSourceLabelSide(b, peer=0, num_rows=num_rows, embed_dim=k, key_bits=1024, seed=1)
    V0 = label.weight_share()
    outputs = []
    for rows, coef in batches:
        z = label.forward()
        outputs.append(z)
        label.backward(z - 1.0, lr)  # the gradient of 0.5 * ||z - 1||^2
    t.join()
    W = (box["U0"] + V0).astype(np.float64) / S
    for (rows, coef), z in zip(batches, outputs):
        expected = coef[..., None] * W[rows]
        np.testing.assert_allclose(z.numpy(), expected, atol=1e-3)
        grad = expected - 1.0
        update = np.zeros_like(W)
        np.add.at(update, rows.reshape(-1), (coef[..., None] * grad).reshape(-1, k))
        W = W - lr * update
    final = (box["U"] + label.weight_share()).astype(np.float64) / S
    np.testing.assert_allclose(final, W, atol=5e-3)
    # neither share alone is the weight: after an update each is masked by a uniform ring element
    assert np.abs(box["U"] / S - final).mean() > 100 and np.abs(label.weight_share() / S - final).mean() > 100


def _blind_tables():
    from sgl.datasets.ctr import CTRData

    rng = np.random.default_rng(0)
    n = 48
    sparse = np.stack([rng.integers(0, 6, n), rng.integers(0, 3, n)], 1)
    dense = rng.normal(size=(n, 2)).astype(np.float32)
    labels = ((sparse[:, 1] == 0) ^ (dense[:, 1] > 1)).astype(np.float32)
    data = CTRData(dense, sparse, labels, [6, 3], ["F1", "F2"])
    return data.subset(np.arange(32)), data.subset(np.arange(32, 40)), data.subset(np.arange(40, 48))


def test_blindfl_split_training_equals_plaintext_split_learning():
    """WDL with a BlindFL source layer at the passive party (Embed F2 + MatMul I2) trains like
    plaintext split learning with the same SGD bottom, within fixed-point error."""
    pytest.importorskip("phe")
    from sgl.federated import FederatedConfig, FieldSplit, train_federated

    train, val, test = _blind_tables()
    split = FieldSplit({"guest": ["I1", "F1"], "host": ["I2", "F2"]})
    base = dict(embed_dim=2, hidden=[4], batch_size=8, max_steps=2 if not os.environ.get("SGL_SLOW_TESTS") else 8,
                lr=0.05, passive_optimizer="sgd", passive_lr=0.5, timeout=120)
    plain = train_federated(train, val, test, split, FederatedConfig(**base), backend="thread")
    blind = train_federated(train, val, test, split, FederatedConfig(**base, blindfl=True, key_bits=1024),
                            backend="thread")
    np.testing.assert_allclose(blind["losses"], plain["losses"], atol=2e-4)
    assert abs(blind["test_auc"] - plain["test_auc"]) < 0.02
    # only ciphertexts, masked shares and the key cross: 2 x 1024-bit ciphertexts are 257 bytes per value
    assert blind["traffic"]["bytes_received"] > 20 * plain["traffic"]["bytes_received"]


@pytest.mark.parametrize("bad, match", [(dict(passive_optimizer="adam"), "plain SGD"),
                                        (dict(key_bits=512), ">= 1024"),
                                        (dict(bottom_hidden=[4]), "bottom_hidden"),
                                        (dict(defense="max-norm"), "defense")])
def test_blindfl_config_errors(bad, match):
    from sgl.federated import FederatedConfig

    options = dict(blindfl=True, passive_optimizer="sgd", key_bits=1024)
    options.update(bad)
    with pytest.raises(ConfigError, match=match):
        FederatedConfig(**options)
