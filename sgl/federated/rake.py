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
fidelity and inversion degrade while the top model learns to use either output. With an MLP
bottom the two share the embedding tables and hidden layers and own only their output layers
(:class:`RakeTwin`), so every shared weight learns from every row; and a consistency term
(:func:`rake_loss`, weight ``rake_consistency``) uses the derivatives the client receives anyway
to keep :math:`f_1 - f_2` out of the directions the top model's loss depends on.

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

from typing import Any, Dict, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sgl.errors import ConfigError
from sgl.federated.models import PartyBottom, _seeded, build_bottom
from sgl.federated.split import PartyView

__all__ = ["train_surrogate", "surrogate_error", "invert_dense", "rake_attack", "RakeTwin", "rake_twin", "rake_loss"]


class RakeTwin(nn.Module):
    r"""Rake's second bottom model: the **first bottom's** embedding tables, dense vectors and
    hidden layers with its own output layer, :math:`f_2(x) = W_2 z(x) + b_2` beside
    :math:`f_1(x) = W_1 z(x) + b_1`, :math:`z` the shared hidden activation.

    Everything but the output layers learns from every row whichever bottom the coin picks; the
    differentiation loss acts on the output layers (and, through them, on the shared part). The
    first bottom is held by reference, not as a submodule, so an optimizer over both bottoms'
    parameters sees each shared tensor once.

    Example:
        >>> import torch
        >>> first = PartyBottom([5, 7], 2, embed_dim=4, embed_dense=True, hidden=[8])
        >>> twin = RakeTwin(first, torch.nn.Linear(8, 16))
        >>> dense, ids = torch.randn(3, 2), torch.tensor([[0, 1], [4, 6], [2, 3]])
        >>> twin(dense, ids).shape, len(list(twin.parameters()))
        (torch.Size([3, 4, 4]), 2)
    """

    def __init__(self, first: PartyBottom, head: nn.Linear) -> None:
        super().__init__()
        if first.mlp is None:
            raise ConfigError("RakeTwin shares all but the output layer, so the bottom needs an MLP head "
                              "(set bottom_hidden, e.g. [64])")
        self._first = (first,)  # a tuple: not registered, so the shared tensors are not the twin's parameters
        self.head = head
        self.num_out, self.embed_dim = first.num_out, first.embed_dim

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        first = self._first[0]
        z = first.mlp[:-1](first.fields(dense, ids).flatten(1))
        return self.head(z).view(z.shape[0], self.num_out, self.embed_dim)


def rake_twin(first: PartyBottom, view: PartyView, rank: int, embed_dim: int, hidden: Sequence[int],
              embedding: str, seed: int) -> nn.Module:
    """Rake's second bottom for party ``rank``: a :class:`RakeTwin` of ``first`` when the bottoms
    have an MLP (``hidden``), else a whole second bottom (nothing could differ otherwise). Its
    output layer is initialised from its own seed (that of bottom ``f"bottom{rank}.1"``)."""
    second = build_bottom(view, rank, embed_dim, hidden, embedding, seed, copy=1)
    return RakeTwin(first, second.mlp[-1]) if second.mlp is not None else second


def rake_loss(f1: torch.Tensor, f2: torch.Tensor, coin: torch.Tensor, g: Optional[torch.Tensor] = None,
              weight: float = 1.0, consistency: float = 0.0) -> torch.Tensor:
    r"""The client's extra loss for Rake's two bottoms on one batch.

    :math:`\lambda\,\overline{\mathrm{relu}(\cos(f_1, f_2))}` keeps the outputs apart; with
    ``consistency`` :math:`\mu` and the derivatives ``g`` the client received for the rows it sent
    (``coin`` true: it sent :math:`f_1`), it adds :math:`\mu\,\overline{\delta_i^2}` with
    :math:`\delta_i = B\,g_i\cdot(f_{\bar c}(x_i) - f_c(x_i))`, the first-order change of row
    ``i``'s loss had the other bottom served it. That pushes the two bottoms' difference into
    directions the top model does not use, so the task does not pay for it, while the outputs
    stay apart. ``g`` is treated as a constant (it is what the client received).

    Example:
        >>> import torch
        >>> f1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> coin = torch.tensor([True, False])
        >>> float(rake_loss(f1, -f1, coin))                      # opposite outputs: nothing to push
        0.0
        >>> g = torch.tensor([[0.5, 0.0], [0.0, 0.0]])           # the top model uses row 0's first coordinate
        >>> float(rake_loss(f1, -f1, coin, g, consistency=1.0))  # delta_0 = 2 * 0.5 * (-2) = -2, delta_1 = 0
        2.0
    """
    b = f1.shape[0]
    out = weight * F.relu(F.cosine_similarity(f1.reshape(b, -1), f2.reshape(b, -1), dim=1)).mean()
    if consistency and g is not None:
        if g.shape[0] != b:
            raise ConfigError(f"rake_loss: derivatives for {g.shape[0]} rows, bottom outputs for {b}")
        other_minus_sent = torch.where(coin.reshape(b, *([1] * (f1.dim() - 1))), f2 - f1, f1 - f2)
        delta = b * (g.detach().reshape(b, -1) * other_minus_sent.reshape(b, -1)).sum(1)
        out = out + consistency * delta.square().mean()
    return out


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
