r"""GCond / DosCond gradient matching (Jin et al., ICLR 2022 / KDD 2022), used by :func:`sgl.tasks.condense`.

The matched model is GCond's Cora choice, a linear SGC: logits :math:`= \hat A^k X W`. Its
cross-entropy gradient has the closed form :math:`\nabla_W = H^\top(\mathrm{softmax}(HW) - Y)/n`
with :math:`H = \hat A^k X`, so the real side is a few small products on precomputed rows
and the synthetic side is differentiable in :math:`X'` and :math:`A'` through :math:`H'`.
Per epoch a fresh :math:`W_0` is drawn; in each of ``outer`` steps the loss
:math:`\sum_c \tfrac{n'_c}{\max n'}\sum_o \big(1-\cos(g^{\text{real}}_{c,:o}, g^{\text{syn}}_{c,:o})\big)`
(GCond's distance, bias ignored) updates the adjacency MLP during the first 10 of every 50
epochs and the features otherwise; between outer steps :math:`W` trains ``inner`` steps on the
synthetic graph with :math:`A'` detached. DosCond is ``outer = 1, inner = 0``.

Two deviations from GCond's code, both for the zoo models that train on the result: the
adjacency MLP starts at the real graph's edge density instead of 0.5 everywhere (a complete
graph that mixed all classes; with it, a GCN trained on Cora condensed to 70 nodes scored ~30%),
and non-negative real features keep :math:`X'` non-negative (projected after each step).
"""
from __future__ import annotations

from typing import Any, Tuple

import torch
import torch.nn.functional as F
from torch import nn


from sgl.tasks.condense_hops import torch_hops

__all__ = ["PairAdjacency", "match_gradients", "dense_propagate", "matching_distance"]


class _PairBatchNorm(nn.Module):
    """BatchNorm over all pairs, always with the statistics of the pairs at hand: the batch is every
    pair of the synthetic graph, in training and afterwards (and torch's CPU batch_norm kernel was
    measured ~100x slower than these few ops here)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(width)), nn.Parameter(torch.zeros(width))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        mean = h.mean(dim=0)
        var = h.var(dim=0, unbiased=False)
        return (h - mean) * torch.rsqrt(var + 1e-5) * self.weight + self.bias


class PairAdjacency(nn.Module):
    r"""GCond's structure generator: :math:`A'_{ij} = \sigma(\tfrac12(s_{ij} + s_{ji}))`, zero diagonal,
    with :math:`s_{ij} = \mathrm{MLP}([x_i; x_j])` (3 layers, BatchNorm). The first layer on the
    concatenation is split into two halves, so pairs cost ``O(n'^2 h)`` rather than ``O(n'^2 d h)``."""

    def __init__(self, in_features: int, hidden: int = 128, density: float = 0.5) -> None:
        super().__init__()
        self.left, self.right = nn.Linear(in_features, hidden), nn.Linear(in_features, hidden, bias=False)
        self.rest = nn.Sequential(_PairBatchNorm(hidden), nn.ReLU(), nn.Linear(hidden, hidden), _PairBatchNorm(hidden),
                                  nn.ReLU(), nn.Linear(hidden, 1))
        # start near the asked edge density instead of sigmoid(0) = 0.5, a complete graph that
        # averages every class together (our deviation from GCond, see docs/acceleration.md)
        density = min(max(density, 1e-4), 0.5)
        nn.init.constant_(self.rest[-1].bias, float(torch.logit(torch.tensor(density))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.size(0)
        pairs = (self.left(x).unsqueeze(1) + self.right(x).unsqueeze(0)).reshape(n * n, -1)
        scores = self.rest(pairs).view(n, n)
        upper = torch.triu(torch.sigmoid((scores + scores.T) / 2), diagonal=1)
        return upper + upper.T  # exactly symmetric (SIMD and scalar sigmoid paths may differ by an ulp)


def dense_propagate(adj: torch.Tensor, x: torch.Tensor, k: int) -> torch.Tensor:
    r""":math:`\hat A^k X` with :math:`\hat A = \tilde D^{-1/2}(A + I)\tilde D^{-1/2}` on a small dense graph."""
    a = adj + torch.eye(adj.size(0), device=adj.device, dtype=adj.dtype)
    d = a.sum(dim=1).pow(-0.5)
    a = d.unsqueeze(1) * a * d.unsqueeze(0)
    for _ in range(k):
        x = a @ x
    return x


def _linear_gradient(h: torch.Tensor, weight: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    p = torch.softmax(h @ weight, dim=1)
    return h.T @ (p - F.one_hot(y, weight.size(1)).to(h.dtype)) / h.size(0)


def matching_distance(real: torch.Tensor, syn: torch.Tensor) -> torch.Tensor:
    """GCond's "ours" distance: sum over output units of 1 - cosine (0 for identical gradients)."""
    return (1 - F.cosine_similarity(real, syn, dim=0, eps=1e-6)).sum()


def match_gradients(graph: Any, x: torch.Tensor, train: torch.Tensor, labels: torch.Tensor, y_syn: torch.Tensor,
                    budget: torch.Tensor, config: Any, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Learn ``(X', A')`` for the synthetic labels ``y_syn`` (see the module docstring)."""
    device = x.device
    num_classes = budget.numel()
    h_real = torch_hops(graph, x, config.k)[-1][train]
    generator = torch.Generator().manual_seed(int(seed))
    init = torch.cat([train[(labels == c).nonzero().flatten()[torch.randint(int((labels == c).sum()), (int(size),),
                                                                             generator=generator)]]
                      for c, size in enumerate(budget.tolist()) if size > 0])
    feat = nn.Parameter(x[init].clone())
    # bag-of-words features stay non-negative (our projection, not GCond's): zoo models row-normalise
    # their input, which a row with negative entries summing to ~0 would blow up
    nonnegative = bool((x >= 0).all())
    torch.manual_seed(int(seed))
    # the real graph's mean degree, spread over the synthetic pairs
    density = graph.num_edges / graph.num_nodes / max(1, int(budget.sum()) - 1)
    pge = PairAdjacency(x.size(1), config.hidden, density).to(device)
    opt_feat = torch.optim.Adam([feat], lr=config.lr_feat)
    opt_adj = torch.optim.Adam(pge.parameters(), lr=config.lr_adj)
    classes = [c for c in range(num_classes) if int(budget[c]) > 0]
    real_rows = {c: h_real[labels == c] for c in classes}
    real_y = {c: labels[labels == c] for c in classes}
    syn_rows = {c: (y_syn == c).nonzero().flatten() for c in classes}
    weight_of = {c: float(budget[c]) / float(budget.max()) for c in classes}
    for epoch in range(config.epochs):
        weight = torch.empty(x.size(1), num_classes, device=device)
        nn.init.xavier_uniform_(weight)
        weight.requires_grad_(True)
        opt_model = torch.optim.Adam([weight], lr=config.lr_model)
        update_adj = epoch % 50 < 10
        pge.train()
        for step in range(config.outer):
            h_syn = dense_propagate(pge(feat), feat, config.k)
            w0 = weight.detach()
            loss = torch.zeros((), device=device)
            for c in classes:
                g_real = _linear_gradient(real_rows[c], w0, real_y[c])
                g_syn = _linear_gradient(h_syn[syn_rows[c]], w0, y_syn[syn_rows[c]])
                loss = loss + weight_of[c] * matching_distance(g_real, g_syn)
            opt_feat.zero_grad()
            opt_adj.zero_grad()
            loss.backward()
            (opt_adj if update_adj else opt_feat).step()
            if nonnegative:
                with torch.no_grad():
                    feat.clamp_(min=0)
            if step == config.outer - 1:
                break
            with torch.no_grad():
                h_fixed = dense_propagate(pge(feat), feat, config.k)
            for _ in range(config.inner):
                opt_model.zero_grad()
                F.cross_entropy(h_fixed @ weight, y_syn).backward()
                opt_model.step()
    pge.eval()
    with torch.no_grad():
        adj = pge(feat)
    return feat.detach(), adj
