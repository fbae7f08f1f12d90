"""Hits@K and MRR equal ogb.linkproppred.Evaluator's; AUC/AP; error paths."""
import pytest
import torch

from sgl.errors import ConfigError, GraphError
from sgl.tasks.ranking_metrics import (
    check_metric_name,
    hits_at_k,
    link_eval,
    link_metric,
    mean_reciprocal_rank,
    roc_auc_ap,
)

Evaluator = pytest.importorskip("ogb.linkproppred").Evaluator  # reads only the master.csv ogb ships


def _scores(shape, ties, generator):
    """Random scores; with ``ties`` only 8 distinct values, so equal scores are common."""
    scores = torch.rand(shape, generator=generator)
    return (scores * 8).floor() / 8 if ties else scores


@pytest.mark.parametrize("name", ["ogbl-ddi", "ogbl-collab", "ogbl-ppa"])
@pytest.mark.parametrize("ties", [False, True])
def test_hits_at_k_equals_ogb(name, ties):
    evaluator = Evaluator(name)
    generator = torch.Generator().manual_seed(3)
    for num_pos, num_neg in ((50, 300), (200, 1000), (40, evaluator.K - 1)):
        pos, neg = _scores(num_pos, ties, generator), _scores(num_neg, ties, generator)
        expected = evaluator.eval({"y_pred_pos": pos, "y_pred_neg": neg})[f"hits@{evaluator.K}"]
        assert hits_at_k(pos, neg, evaluator.K) == pytest.approx(expected, abs=1e-12)
        assert link_eval(pos, neg, hits_k=[evaluator.K])[f"hits@{evaluator.K}"] == pytest.approx(expected, abs=1e-12)
    assert hits_at_k(torch.ones(3), torch.zeros(2), 5) == 1.0  # fewer negatives than K: OGB says 1


@pytest.mark.parametrize("ties", [False, True])
def test_mrr_equals_ogb_per_positive_lists(ties):
    evaluator = Evaluator("ogbl-citation2")
    generator = torch.Generator().manual_seed(5)
    pos, neg = _scores(64, ties, generator), _scores((64, 100), ties, generator)
    lists = evaluator.eval({"y_pred_pos": pos, "y_pred_neg": neg})
    assert mean_reciprocal_rank(pos, neg) == pytest.approx(float(lists["mrr_list"].mean()), abs=1e-6)
    flat = link_eval(pos, neg.reshape(-1), hits_k=[1, 3, 10], neg_per_pos=100)
    assert flat["mrr"] == pytest.approx(float(lists["mrr_list"].mean()), abs=1e-6)
    for k in (1, 3, 10):
        assert flat[f"hits@{k}"] == pytest.approx(float(lists[f"hits@{k}_list"].mean()), abs=1e-6)
    assert link_metric("mrr", pos, neg.reshape(-1), neg_per_pos=100) == pytest.approx(flat["mrr"])


@pytest.mark.parametrize("ties", [False, True])
def test_mrr_against_a_shared_set_equals_ogb_on_the_repeated_matrix(ties):
    evaluator = Evaluator("ogbl-citation2")
    generator = torch.Generator().manual_seed(7)
    pos, neg = _scores(80, ties, generator), _scores(150, ties, generator)
    expected = evaluator.eval({"y_pred_pos": pos, "y_pred_neg": neg.expand(80, 150)})["mrr_list"].mean()
    assert mean_reciprocal_rank(pos, neg) == pytest.approx(float(expected), abs=1e-6)


def test_auc_ap_hand_values_and_selection_metrics():
    pos, neg = torch.tensor([0.9, 0.4, 0.8]), torch.tensor([0.5, 0.1])
    out = roc_auc_ap(pos, neg)
    assert out["auc"] == pytest.approx(5 / 6)
    assert out["ap"] == pytest.approx((1 + 1 + 0.75) / 3)
    assert link_metric("AUC", pos, neg) == pytest.approx(5 / 6)
    assert link_metric("hits@1", pos, neg) == pytest.approx(2 / 3)  # 0.9 and 0.8 beat the best negative 0.5
    assert check_metric_name("Hits@050") == "hits@50"


def test_metric_errors():
    with pytest.raises(GraphError, match="empty"):
        hits_at_k(torch.tensor([]), torch.tensor([0.1]), 1)
    with pytest.raises(ConfigError, match="positive integer K"):
        hits_at_k(torch.tensor([0.2]), torch.tensor([0.1]), 0)
    with pytest.raises(ConfigError, match="unknown link metric 'precision'"):
        check_metric_name("precision")
    with pytest.raises(GraphError, match=r"one row per positive"):
        mean_reciprocal_rank(torch.rand(3), torch.rand(2, 5))
    with pytest.raises(GraphError, match="need 6 negative scores"):
        link_eval(torch.rand(3), torch.rand(5), neg_per_pos=2)
