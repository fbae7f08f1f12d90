"""VF2Boost / SecureBoost: packing decodes exactly, the federated trees equal the plaintext trees,
VF2Boost needs far fewer decryptions, and bad input is refused (512-bit test keys for speed)."""
from pathlib import Path

import numpy as np
import pytest

from sgl.errors import ConfigError, FeatureError
from sgl.federated.gbdt_packing import SlotPacker, decode_fixed, encode_fixed, pack_ciphertexts, to_signed
from sgl.federated.vf2boost import VF2BoostConfig, plaintext_trees, train_vf2boost
from sgl.federated.vf2boost_crypto import PlainCodec
from sgl.gbdt import GBDT, GBDTConfig

phe = pytest.importorskip("phe")

SMALL = GBDTConfig(num_trees=2, max_depth=3, max_bins=8)


@pytest.fixture(scope="module")
def keys():
    return phe.paillier.generate_paillier_keypair(n_length=512)


def _data(rows=160, seed=0):
    """Three parties' columns; labels depend on every party's columns."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 7))
    y = (X[:, 0] - X[:, 3] + 0.7 * X[:, 5] + 0.3 * rng.normal(size=rows) > 0).astype(float)
    return [X[:, :2], X[:, 2:5], X[:, 5:]], y


# -- packing ---------------------------------------------------------------------------------------

def test_slot_packing_decodes_signed_values_and_sums_exactly():
    rng = np.random.default_rng(0)
    w = SlotPacker.slot_bits_for(50 * 2 ** 20)
    packer = SlotPacker.for_key(512, w)
    assert packer.slots == (512 - 2) // w
    values = rng.integers(-2 ** 20, 2 ** 20, size=(50, packer.slots))
    values[0] = 2 ** 20 - 1
    values[1] = -(2 ** 20)
    total = sum(packer.pack(row.tolist()) for row in values)
    assert packer.unpack(total, packer.slots) == values.sum(axis=0).tolist()
    assert all(packer.unpack(packer.pack(row.tolist()), packer.slots) == row.tolist() for row in values[:5])
    # a sum that outgrows its slot is detected rather than decoded wrongly
    narrow = SlotPacker(slot_bits=6, slots=2)
    with pytest.raises(ConfigError, match="overflowed"):
        narrow.unpack(narrow.pack([31, 0]) * 4, 1)
    with pytest.raises(ConfigError, match="does not fit"):
        narrow.pack([32])


def test_fixed_point_round_trip_and_signed_residues():
    v = np.array([0.5, -0.25, 1e-3, -3.0])
    assert np.abs(decode_fixed(encode_fixed(v, 20), 20) - v).max() <= 2.0 ** -21
    assert to_signed(97, 101) == -4 and to_signed(50, 101) == 50
    with pytest.raises(ConfigError, match="non-finite"):
        encode_fixed([np.nan], 8)


def test_ciphertext_packing_under_paillier_decodes_exactly(keys):
    from sgl.federated.vf2boost_crypto import PaillierCodec

    owner, passive = PaillierCodec(*keys, crt=True), PaillierCodec(keys[0])
    w = 20
    packer = SlotPacker.for_key(512, w)
    pairs = [(-5, 7), (123456, -1), (-(2 ** 18), 2 ** 18 - 3)]
    # one ciphertext per row holds h + g * 2^w; two rows summed homomorphically, then packed
    rows = owner.encrypt([h + (g << w) for g, h in pairs] + [h + (g << w) for g, h in pairs])
    sums = [passive.add(rows[i], rows[i + 3]) for i in range(3)]
    packed = pack_ciphertexts(sums, 2 * w, passive.shift, passive.add)
    digits = packer.unpack(owner.decrypt([packed])[0], 6)
    assert digits == [2 * v for g, h in pairs for v in (h, g)]
    assert passive.stats.hom_shifts == 2 and owner.stats.decryptions == 1
    with pytest.raises(ConfigError, match="key owner"):
        passive.decrypt([packed])
    with pytest.raises(ConfigError, match="private key"):
        PaillierCodec(keys[0], crt=True)


def test_plain_codec_wire_round_trip():
    codec = PlainCodec(64)
    values = [-(2 ** 62), 0, 2 ** 62 + 5]
    assert codec.from_wire(codec.to_wire(values)) == values


# -- trees -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(keys):
    parties, y = _data()
    config = VF2BoostConfig(SMALL, block_rows=48)
    out = {"ref": plaintext_trees(parties, y, config)}
    for mode in ("vf2boost", "secureboost"):
        out[mode] = train_vf2boost(parties, y, VF2BoostConfig(SMALL, mode=mode, block_rows=48), keypair=keys)
    out["plain"] = train_vf2boost(parties, y, VF2BoostConfig(SMALL, encrypt=False))
    return out


@pytest.mark.parametrize("mode", ["vf2boost", "secureboost", "plain"])
def test_federated_trees_equal_plaintext_trees(runs, mode):
    trees = runs[mode].model.trees
    assert len(trees) == 2 and trees[0].num_leaves >= 4
    for ours, ref in zip(trees, runs["ref"]):
        # identical fixed-point sums: the same splits, ties included, and the same leaf values
        assert ours.same_structure(ref, atol=1e-12)
    used = {int(f) for t in trees for f in t.feature if f >= 0}
    assert used & {0, 1} and used & {2, 3, 4}, "splits should come from the active and a passive party"


def test_vf2boost_needs_far_fewer_crypto_operations(runs):
    vf, sb = runs["vf2boost"].stats, runs["secureboost"].stats
    assert vf["encryptions"] * 2 == sb["encryptions"] == 2 * 2 * 160
    assert vf["decryptions"] * 8 <= sb["decryptions"]
    assert vf["cipher_bytes"] * 3 <= sb["cipher_bytes"]
    assert vf["hom_adds"] < sb["hom_adds"]
    assert sb["hom_shifts"] == 0 < vf["hom_shifts"]
    assert runs["plain"].stats["cipher_bytes"] > 0 and runs["vf2boost"].seconds["total"] > 0


def test_parties_with_different_bin_counts(keys):
    parties, y = _data(rows=100, seed=3)
    rng = np.random.default_rng(3)
    few = rng.integers(0, 3, size=(100, 2)).astype(float)  # 3 values: 4 bin codes against 9
    y = np.where(few[:, 0] == 2, 1.0, y)
    three = [parties[0], few, parties[2]]
    config = VF2BoostConfig(SMALL, block_rows=32)
    ref = plaintext_trees(three, y, config)
    for mode in ("vf2boost", "secureboost"):
        fit = train_vf2boost(three, y, VF2BoostConfig(SMALL, mode=mode, block_rows=32), keypair=keys)
        assert all(a.same_structure(b, atol=1e-12) for a, b in zip(fit.model.trees, ref))
    assert any(f in (2, 3) for t in ref for f in t.feature), "the low-cardinality party should win a split"


def test_squared_loss_matches_the_float_gbdt_within_fixed_point_error(keys):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 4))
    y = X[:, 0] * 2 + np.sin(X[:, 3]) + 0.1 * rng.normal(size=120)
    gbdt = GBDTConfig(num_trees=2, max_depth=2, max_bins=8, loss="squared", learning_rate=0.5)
    fit = train_vf2boost([X[:, :2], X[:, 2:]], y, VF2BoostConfig(gbdt, optimisations=("packing", "reorder")),
                         keypair=keys)
    ref = GBDT(gbdt).fit(X, y)  # float64 gradients: continuous targets leave no ties
    for ours, theirs in zip(fit.model.trees, ref.trees):
        assert ours.same_structure(theirs, atol=1e-6)
    np.testing.assert_allclose(fit.model.predict_raw([X[:, :2], X[:, 2:]]), ref.predict_raw(X), atol=1e-5)


def test_parties_as_processes_give_the_same_trees():
    """Three processes (one active, two passive) over CommChannel, 1024-bit key made by the active party."""
    parties, y = _data(rows=60, seed=2)
    gbdt = GBDTConfig(num_trees=1, max_depth=2, max_bins=4)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(Path(__file__).resolve().parents[2]))
        fit = train_vf2boost(parties, y, VF2BoostConfig(gbdt, block_rows=16, timeout=60.0), backend="process")
    ref = plaintext_trees(parties, y, VF2BoostConfig(gbdt))
    assert fit.model.trees[0].same_structure(ref[0], atol=1e-12)
    # 60 rows, one packed ciphertext each, to each of the 2 passive parties (256 bytes at 1024 bits)
    assert fit.stats["encryptions"] == 60 and fit.stats["cipher_bytes"] > 2 * 60 * 256
    assert len(fit.parties) == 3 and all(log["stats"]["hom_adds"] > 0 for log in fit.parties[1:])


# -- bad input -------------------------------------------------------------------------------------

def test_bad_input_gets_clear_errors(keys):
    parties, y = _data(rows=30)
    cfg = VF2BoostConfig(SMALL, encrypt=False)
    with pytest.raises(ConfigError, match=r"passive party \[1\]"):
        train_vf2boost(parties, [y, y, None], cfg)
    with pytest.raises(ConfigError, match="labels are missing"):
        train_vf2boost(parties, [None, None, None], cfg)
    assert train_vf2boost(parties, [y, None, None], cfg).model.trees  # the per-party form, labels at party 0
    with pytest.raises(FeatureError, match="party 1 has no columns"):
        train_vf2boost([parties[0], np.empty((30, 0)), parties[2]], y, cfg)
    with pytest.raises(FeatureError, match="rows"):
        train_vf2boost([parties[0], parties[1][:20]], y, cfg)
    with pytest.raises(ConfigError, match="at least 2"):
        train_vf2boost([parties[0]], y, cfg)
    with pytest.raises(ConfigError, match="labels are missing"):
        train_vf2boost(parties, None, cfg)
    with pytest.raises(FeatureError, match="logloss"):
        train_vf2boost(parties, y * 3, cfg)
    with pytest.raises(ConfigError, match="breakable"):
        train_vf2boost(parties, y, VF2BoostConfig(SMALL, key_bits=512))
    with pytest.raises(ConfigError, match="mode"):
        train_vf2boost(parties, y, VF2BoostConfig(SMALL, mode="fast"))
    with pytest.raises(ConfigError, match="subset"):
        train_vf2boost(parties, y, VF2BoostConfig(SMALL, optimisations=("magic",)))
    with pytest.raises(ConfigError, match="depth-wise"):
        train_vf2boost(parties, y, VF2BoostConfig(GBDTConfig(growth="leafwise", max_depth=0)))
    with pytest.raises(ConfigError, match="backend"):
        train_vf2boost(parties, y, cfg, backend="mpi")
    with pytest.raises(ConfigError, match="thread backend"):
        train_vf2boost(parties, y, VF2BoostConfig(SMALL), backend="process", keypair=keys)
    with pytest.raises(ConfigError, match="frac_bits"):  # 60 fractional bits leave no headroom in a slot
        train_vf2boost(parties, y, VF2BoostConfig(SMALL, frac_bits=60), keypair=keys)
