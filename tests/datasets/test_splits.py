import pytest
import torch

from sgl.datasets import per_class_split, planetoid_split, random_split
from sgl.errors import ConfigError


def test_per_class_counts_and_unlabeled():
    y = torch.tensor([0] * 50 + [1] * 40 + [2] * 3 + [-1] * 7)
    train, val, test = per_class_split(y, 20, 10, seed=0)
    assert torch.bincount(y[train]).tolist() == [20, 20, 3]
    assert torch.bincount(y[val]).tolist() == [10, 10]
    assert int(test.sum()) == 20 + 10  # the rest of classes 0 and 1
    assert not (train | val | test)[y < 0].any()
    _, _, capped = per_class_split(y, 20, 10, test_per_class=5, seed=0)
    assert int(capped.sum()) == 10


def test_planetoid_split():
    y = torch.arange(5000) % 5
    train, val, test = planetoid_split(y, 20, 500, 1000, seed=0)
    assert torch.bincount(y[train]).tolist() == [20] * 5
    assert (int(val.sum()), int(test.sum())) == (500, 1000)
    assert not ((train & val) | (val & test) | (train & test)).any()


def test_validation():
    with pytest.raises(ConfigError):
        per_class_split(torch.zeros(3, dtype=torch.long), train_per_class=-1)
    with pytest.raises(ConfigError):
        planetoid_split(torch.zeros(3))


def test_random_split_fractions_per_class():
    y = torch.tensor([0] * 50 + [1] * 30 + [2] * 20 + [-1] * 5)
    train, val, test = random_split(y, 0.6, 0.2, seed=3)
    assert torch.bincount(y[train]).tolist() == [30, 18, 12]
    assert torch.bincount(y[val]).tolist() == [10, 6, 4]
    assert torch.bincount(y[test]).tolist() == [10, 6, 4]
    assert not ((train & val) | (val & test) | (train & test)).any() and not (train | val | test)[y < 0].any()
    assert not torch.equal(train, random_split(y, 0.6, 0.2, seed=4)[0])
    assert torch.equal(train, random_split(y, 0.6, 0.2, seed=3)[0])
    with pytest.raises(ConfigError, match="at most 1"):
        random_split(y, 0.9, 0.2)
    with pytest.raises(ConfigError, match="train_ratio must be a fraction"):
        random_split(y, 1.5)
