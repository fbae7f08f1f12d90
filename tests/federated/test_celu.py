"""CELU-VFL's workset table and instance weights (sgl.federated.celu)."""
import torch

from sgl.federated import Workset, instance_weights


def test_workset_respects_use_count_staleness_and_window():
    ws = Workset(window=2, max_uses=2, seed=0)
    for b in range(3):
        ws.add(b, rows=b, h=None, g=None, now=b)
    drawn = [ws.draw(now=3).batch_id for _ in range(4)]
    assert all(x != y for x, y in zip(drawn, drawn[1:]))  # the last W-1 = 1 drawn entry is excluded
    counts = {b: drawn.count(b) for b in set(drawn)}
    assert max(counts.values()) <= 2
    assert ws.draw(now=100) is None and len(ws) == 0  # staleness >= W*R evicts everything


def test_instance_weights():
    cur = torch.tensor([[1.0, 0.0], [1.0, 1.0], [-1.0, 0.0]])
    old = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    w = instance_weights(cur, old, xi=0.5)
    assert torch.allclose(w, torch.tensor([1.0, 2 ** -0.5, 0.0]))
    assert torch.equal(instance_weights(cur, old, xi=1.0), torch.ones(3))
