"""Field splits, party views and sample-id alignment (sgl.federated.split)."""
import numpy as np
import pytest

from sgl.datasets.ctr import make_synthetic_ctr
from sgl.errors import ConfigError
from sgl.federated import FieldSplit, check_aligned, default_split, load_split


@pytest.fixture
def data():
    return make_synthetic_ctr(40, [5, 6, 7], num_dense=2, seed=0)


def test_views_hold_own_columns_and_only_party0_has_labels(data):
    split = FieldSplit({"guest": ["I1", "F1"], "host": ["I2", "F2", "F3"]})
    guest, host = split.views(data)
    np.testing.assert_array_equal(guest.sparse[:, 0], data.sparse[:, 0])
    np.testing.assert_array_equal(host.dense[:, 0], data.dense[:, 1])
    assert host.field_dims == [6, 7] and host.labels is None and guest.labels is not None


@pytest.mark.parametrize("parties, match", [
    ({"guest": ["I1", "I2", "F1"], "host": ["F2"]}, "F3 are owned by no party"),
    ({"guest": ["I1", "I2", "F1", "F2"], "host": ["F2", "F3"]}, "'F2' is owned twice"),
    ({"guest": ["I1", "I2", "F1", "X9"], "host": ["F2", "F3"]}, "does not have"),
])
def test_bad_splits_are_named(data, parties, match):
    with pytest.raises(ConfigError, match=match):
        FieldSplit(parties).views(data)


def test_split_needs_two_parties_with_columns():
    with pytest.raises(ConfigError, match="at least 2 parties"):
        FieldSplit({"guest": ["I1"]})
    with pytest.raises(ConfigError, match="owns no column"):
        FieldSplit({"guest": ["I1"], "host": []})


def test_load_split_from_yaml_with_ranges(tmp_path, data):
    path = tmp_path / "fields.yaml"
    path.write_text("guest: [I1-I2, F1]\nhost: F2-F3\n")
    split = load_split(path)
    assert split.parties == {"guest": ["I1", "I2", "F1"], "host": ["F2", "F3"]}
    split.validate(data.dense_names + data.field_names)
    with pytest.raises(ConfigError, match="does not exist"):
        load_split(tmp_path / "missing.yaml")


def test_default_split_gives_dense_to_the_guest(data):
    split = default_split(data, parties=3)
    assert split.parties["guest"] == ["I1", "I2"] and split.num_parties == 3
    split.validate(data.dense_names + data.field_names)


def test_misaligned_sample_ids():
    check_aligned([np.arange(4), np.arange(4)])
    with pytest.raises(ConfigError, match="row 2 holds id 9"):
        check_aligned([np.arange(4), np.array([0, 1, 9, 3])], ["guest", "host"])
    with pytest.raises(ConfigError, match="3 rows vs 4"):
        check_aligned([np.arange(4), np.arange(3)])
