import pytest
import torch
from sklearn.metrics import f1_score

from sgl.tasks import accuracy, macro_f1


def test_accuracy_from_labels_and_logits():
    target = torch.tensor([0, 1, 2, 2])
    assert accuracy(torch.tensor([0, 1, 1, 2]), target) == 0.75
    logits = torch.nn.functional.one_hot(torch.tensor([0, 1, 1, 2]), 3).float()
    assert accuracy(logits, target) == 0.75


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_macro_f1_matches_sklearn(seed):
    gen = torch.Generator().manual_seed(seed)
    target = torch.randint(0, 5, (200,), generator=gen)
    pred = torch.where(torch.rand(200, generator=gen) < 0.6, target, torch.randint(0, 5, (200,), generator=gen))
    assert macro_f1(pred, target, 5) == pytest.approx(f1_score(target, pred, average="macro"))
