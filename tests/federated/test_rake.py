"""Rake's two bottoms: the twin shares all but the output layer; the Rake loss."""
import pytest
import torch

from sgl.errors import ConfigError
from sgl.federated.models import PartyBottom
from sgl.federated.rake import RakeTwin, rake_loss


def _first():
    torch.manual_seed(0)
    return PartyBottom([5, 7], 2, embed_dim=4, embed_dense=True, hidden=[8])


def test_twin_shares_tables_and_hidden_layers_but_not_the_output_layer():
    first = _first()
    twin = RakeTwin(first, torch.nn.Linear(8, 16))
    dense, ids = torch.randn(6, 2), torch.randint(0, 5, (6, 2))
    f1, f2 = first(dense, ids), twin(dense, ids)
    assert f1.shape == f2.shape and not torch.allclose(f1, f2)
    params = [p for m in (first, twin) for p in m.parameters()]
    assert len({id(p) for p in params}) == len(params)  # an optimizer over both sees each tensor once
    f2.sum().backward()  # the twin's loss reaches the shared table and hidden layer
    assert all(p.grad is not None for p in first.embedding.parameters())
    assert first.mlp[0].weight.grad is not None and first.mlp[-1].weight.grad is None


def test_twin_needs_an_mlp():
    with pytest.raises(ConfigError, match="bottom_hidden"):
        RakeTwin(PartyBottom([5], 0, embed_dim=4, embed_dense=True), torch.nn.Linear(4, 4))


def test_rake_loss_consistency_only_penalises_what_the_top_model_uses():
    f1 = torch.randn(8, 3, 2, generator=torch.Generator().manual_seed(1), requires_grad=True)
    f2 = torch.randn(8, 3, 2, generator=torch.Generator().manual_seed(2))
    coin = torch.arange(8) % 2 == 0
    g = torch.zeros(8, 3, 2)
    assert float(rake_loss(f1, f2, coin, g, weight=0.0, consistency=5.0).detach()) == 0.0  # g = 0: nothing is used
    g[:, 0, 0] = 0.1
    loss = rake_loss(f1, f2, coin, g, weight=0.0, consistency=5.0)
    expected = 5.0 * ((8 * 0.1 * (f2 - f1)[:, 0, 0]) ** 2).mean()  # the sign of the difference does not matter
    assert torch.allclose(loss, expected)
    loss.backward()
    assert f1.grad[:, 1:].abs().max() == 0 and f1.grad[:, 0, 0].abs().max() > 0
    with pytest.raises(ConfigError, match="rows"):
        rake_loss(f1, f2, coin, g[:4], consistency=1.0)
