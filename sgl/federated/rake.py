r"""Rake (IJCAI 2025): model and data stealing by a curious server, and the two-bottom defense.

**Attack.** The active party (the "server") sees every activation a passive client sends. With
auxiliary rows whose client features it knows, it fits a **surrogate** of the client's bottom
model on (features, observed activation) pairs (:func:`train_surrogate`, model stealing), then
**inverts** the surrogate to reconstruct the client's dense features from activations it
observes later (:func:`invert_dense`, data stealing; the client's categorical ids are assumed
known to the attacker, which only makes the attack stronger).

**Defense** (``FederatedConfig.rake``). Each client runs two bottom models :math:`f_1, f_2`; a
private coin, independent of the row, picks which one serves each row, and a differentiation
loss :math:`\lambda\,\mathrm{relu}(\cos(f_1(x), f_2(x)))` keeps their outputs apart. The MSE-optimal
surrogate of a coin-mixed pair is :math:`\tfrac12(f_1+f_2)`, wrong for both, so surrogate
fidelity and inversion degrade while the top model learns to use either output.

Metrics: surrogate error = :math:`\mathbb E\lVert\hat f(x)-h\rVert^2 / \mathbb E\lVert h-\bar h\rVert^2`
(0 = perfect copy, 1 = no better than the mean activation); reconstruction error = MSE of the
reconstructed dense columns over their variance (1 = no better than guessing the mean).

Example:
    >>> import numpy as np, torch
    >>> from sgl.federated.split import PartyView
    >>> rng = np.random.default_rng(0)
    >>> view = PartyView("host", rng.normal(size=(300, 2)).astype("float32"), np.ones((300, 1), dtype="int64"),
    ...                  [3], ["C1"], ["I1", "I2"], np.arange(300))
    >>> h = np.stack([np.ones(300), view.dense[:, 0], view.dense[:, 1]], 1)[:, :, None].repeat(2, 2)
    >>> s = train_surrogate(view.rows(np.arange(200)), h[:200], embed_dim=2, epochs=60, lr=0.05, seed=0)
    >>> surrogate_error(s, view.rows(np.arange(200, 300)), h[200:]) < 0.1
    True
"""
from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy as np
import torch

from sgl.federated.models import PartyBottom, _seeded
from sgl.federated.split import PartyView

__all__ = ["train_surrogate", "surrogate_error", "invert_dense", "rake_attack"]


def _tensors(view: PartyView, h: Any):
    return (torch.as_tensor(view.dense), torch.as_tensor(view.sparse),
            torch.as_tensor(np.asarray(h), dtype=torch.float32))


def train_surrogate(view: PartyView, h: Any, embed_dim: int, hidden: Sequence[int] = (), embedding: str = "full",
                    epochs: int = 200, lr: float = 0.01, batch_size: int = 256, seed: int = 0) -> PartyBottom:
    """Fit a bottom model of the client's (public) architecture to map ``view``'s columns to the
    observed activations ``h [N, F_out, k]`` (MSE, Adam)."""
    dense, ids, target = _tensors(view, h)
    with _seeded(seed):
        model = PartyBottom(view.field_dims, view.num_dense, embed_dim, embed_dense=True, hidden=hidden,
                            embedding=embedding)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    n = target.shape[0]
    for _ in range(epochs):
        for rows in torch.randperm(n, generator=gen).split(batch_size):
            opt.zero_grad()
            ((model(dense[rows], ids[rows]) - target[rows]) ** 2).mean().backward()
            opt.step()
    return model.eval()


def surrogate_error(surrogate: PartyBottom, view: PartyView, h: Any) -> float:
    """Relative squared error of the surrogate on rows it did not see (0 = exact copy)."""
    dense, ids, target = _tensors(view, h)
    with torch.no_grad():
        err = (surrogate(dense, ids) - target).pow(2).sum((1, 2)).mean()
        spread = (target - target.mean(0, keepdim=True)).pow(2).sum((1, 2)).mean()
    return float(err / spread.clamp_min(1e-30))


def invert_dense(surrogate: PartyBottom, view: PartyView, h: Any, prior: np.ndarray, steps: int = 200,
                 lr: float = 0.05) -> np.ndarray:
    """Reconstruct the dense columns of ``view``'s rows from activations ``h`` by gradient descent
    through the surrogate, starting from ``prior`` (the auxiliary mean)."""
    dense, ids, target = _tensors(view, h)
    x = torch.as_tensor(np.broadcast_to(prior, dense.shape).copy(), dtype=torch.float32).requires_grad_()
    opt = torch.optim.Adam([x], lr=lr)
    for p in surrogate.parameters():
        p.requires_grad_(False)
    for _ in range(steps):
        opt.zero_grad()
        ((surrogate(x, ids) - target) ** 2).sum().backward()
        opt.step()
    return x.detach().cpu().numpy()


def rake_attack(aux: PartyView, h_aux: Any, test: PartyView, h_test: Any, embed_dim: int,
                hidden: Sequence[int] = (), embedding: str = "full", epochs: int = 100, seed: int = 0
                ) -> Dict[str, float]:
    """Model stealing then data stealing: ``{"surrogate_error", "reconstruction_error"}`` on ``test``
    (reconstruction only when the client has dense columns)."""
    surrogate = train_surrogate(aux, h_aux, embed_dim, hidden, embedding, epochs=epochs, seed=seed)
    out = {"surrogate_error": surrogate_error(surrogate, test, h_test), "reconstruction_error": float("nan")}
    if test.num_dense:
        prior = aux.dense.mean(0, keepdims=True)
        rec = invert_dense(surrogate, test, h_test, prior)
        var = test.dense.var(0).clip(1e-12)
        out["reconstruction_error"] = float(((rec - test.dense) ** 2).mean(0).__truediv__(var).mean())
    return out
