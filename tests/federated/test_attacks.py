"""Norm and direction label-inference attacks (sgl.federated.attacks)."""
import numpy as np
import torch

from sgl.federated import direction_scores, leak_auc, norm_scores, roc_auc


def _toy_derivatives(n=400, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, generator=g) < 0.2).float()
    w = torch.randn(d, generator=g)
    p = torch.sigmoid(torch.randn(n, generator=g) * 0.3 - 1.5)  # mostly-negative predictions
    grad = ((p - y)[:, None] * w[None, :]) + 0.01 * torch.randn(n, d, generator=g)
    return grad, y


def test_attacks_find_labels_on_a_separable_toy():
    g, y = _toy_derivatives()
    assert leak_auc(norm_scores(g), y) > 0.9
    assert leak_auc(direction_scores(g), y) > 0.9
    assert leak_auc(direction_scores(g, reference=g[y.argmax()]), y) > 0.9


def test_auc_reference_values():
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    assert np.isnan(roc_auc([0.1, 0.2], [1, 1]))
    assert leak_auc([0.9, 0.1], [0, 1]) == 1.0
    assert leak_auc(torch.zeros(4), torch.tensor([0, 1, 0, 1])) == 0.5
