"""FederatedConfig's optimizer choice (the reference setup, FDL's playground, trains with Adagrad)."""
import pytest
import torch

from sgl.errors import ConfigError
from sgl.federated import FederatedConfig
from sgl.federated.party import make_optimizer


def _params():
    return [torch.nn.Parameter(torch.zeros(3))]


@pytest.mark.parametrize("name, cls", [("adagrad", torch.optim.Adagrad), ("Adagrad", torch.optim.Adagrad),
                                       ("adam", torch.optim.Adam), ("sgd", torch.optim.SGD)])
def test_optimizer_is_built_with_its_learning_rate(name, cls):
    cfg = FederatedConfig(optimizer=name, lr=0.1)
    opt = make_optimizer(_params(), cfg)
    assert type(opt) is cls and opt.param_groups[0]["lr"] == 0.1


def test_passive_optimizer_and_lr_apply_to_passive_parties_only():
    cfg = FederatedConfig(optimizer="adam", lr=1e-3, passive_optimizer="adagrad", passive_lr=0.1)
    active, passive = make_optimizer(_params(), cfg), make_optimizer(_params(), cfg, passive=True)
    assert type(active) is torch.optim.Adam and active.param_groups[0]["lr"] == 1e-3
    assert type(passive) is torch.optim.Adagrad and passive.param_groups[0]["lr"] == 0.1


def test_adagrad_step_matches_torch_reference():
    """One step on a fixed gradient: lr * g / sqrt(g^2 + eps) = lr * sign(g) for |g| >> eps."""
    p = torch.nn.Parameter(torch.zeros(2))
    opt = make_optimizer([p], FederatedConfig(optimizer="adagrad", lr=0.1))
    p.grad = torch.tensor([2.0, -0.5])
    opt.step()
    assert torch.allclose(p.detach(), torch.tensor([-0.1, 0.1]), atol=1e-6)


@pytest.mark.parametrize("bad, match", [(dict(optimizer="rmsprop"), "optimizer must be one of adam, adagrad, sgd"),
                                        (dict(passive_optimizer="lbfgs"), "passive_optimizer must be one of"),
                                        (dict(optimizer="adagrad", lr=0.0), "lr must be > 0"),
                                        (dict(passive_lr=-0.1), "passive_lr must be > 0")])
def test_bad_optimizer_settings_raise(bad, match):
    with pytest.raises(ConfigError, match=match):
        FederatedConfig(**bad)
