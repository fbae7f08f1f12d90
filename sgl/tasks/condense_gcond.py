r"""GCond / DosCond gradient matching (Jin et al., ICLR 2022 / KDD 2022), used by :func:`sgl.tasks.condense`.

The matched model is GCond's Cora choice in its first release (``models/sgc_2.py``), a linear
SGC: logits :math:`= \hat A^k X W + b`. Its cross-entropy gradient has the closed form
:math:`\nabla_W = H^\top(\mathrm{softmax}(HW + b) - Y)/n` with :math:`H = \hat A^k X`, so the
gradients of *all* classes come from one product :math:`H^\top R` (``R`` holds each class's
residual rows in its own column block, :func:`class_gradients`) on precomputed real rows, and the
synthetic side is differentiable in :math:`X'` and :math:`A'` through :math:`H'`.
Per epoch a fresh :math:`(W_0, b_0)` is drawn (GCond's init, uniform :math:`\pm 1/\sqrt d`); in
each of ``outer`` steps the loss
:math:`\sum_c \tfrac{n'_c}{\max n'}\sum_o \big(1-\cos(g^{\text{real}}_{c,:o}, g^{\text{syn}}_{c,:o})\big)`
(GCond's "ours" distance; the bias gradient is ignored, as there) updates the adjacency MLP during
the first 10 of every 50 epochs and the features otherwise; between outer steps :math:`(W, b)`
trains ``inner`` Adam steps on the synthetic graph with :math:`A'` detached. DosCond is
``outer = 1, inner = 0``. The adjacency of an outer step is computed once and its detached copy
feeds the inner steps before it (GCond computes it twice; same values, half the pair-MLP work).

Deviations from GCond's code (docs/acceleration.md lists them all): the real gradients use the
exact :math:`\hat A^2 X` rows instead of a [10, 5] neighbour sample; the adjacency MLP starts at
the real graph's edge density instead of 0.5 everywhere (a complete graph that mixed all classes;
with it, a GCN trained on Cora condensed to 70 nodes scored ~30%); and non-negative real features
keep :math:`X'` non-negative (projected after each step).
"""
from __future__ import annotations

import math
from typing import Any, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from sgl.tasks.condense_hops import torch_hops

__all__ = ["PairAdjacency", "match_gradients", "dense_propagate", "matching_distance", "class_gradients"]


class _PairBatchNorm(nn.Module):
    """BatchNorm over all pairs, always with the statistics of the pairs at hand: the batch is every
    pair of the synthetic graph, in training and afterwards (as GCond's ``pge.inference``, which
    leaves the module in training mode). ``Tensor.var`` over dim 0 was measured ~5 ms on 4900 x 128
    on this CPU; the centred square below is a fraction of that."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(width)), nn.Parameter(torch.zeros(width))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        centred = h - h.mean(dim=0)
        var = centred.square().mean(dim=0)
        return centred * (torch.rsqrt(var + 1e-5) * self.weight) + self.bias

    def pairs(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        """The BatchNorm of all ``n^2`` rows ``left_i + right_j`` from ``n``-row statistics: over the full grid
        the mean is ``mean(left) + mean(right)`` and the variance ``var(left) + var(right)`` (exactly),
        so each side is normalised once and only their sum is ``n^2`` wide."""
        left, right = left - left.mean(dim=0), right - right.mean(dim=0)
        scale = torch.rsqrt(left.square().mean(dim=0) + right.square().mean(dim=0) + 1e-5) * self.weight
        return ((left * scale + self.bias).unsqueeze(1) + (right * scale).unsqueeze(0)).reshape(-1, left.size(1))


class PairAdjacency(nn.Module):
    r"""GCond's structure generator: :math:`A'_{ij} = \sigma(\tfrac12(s_{ij} + s_{ji}))`, zero diagonal,
    with :math:`s_{ij} = \mathrm{MLP}([x_i; x_j])` (3 layers, BatchNorm over all pairs). The first layer on
    the concatenation is split into two halves and its BatchNorm taken from per-node statistics
    (:meth:`_PairBatchNorm.pairs`, exact), so only the second layer is ``n'^2`` wide.

    >>> with torch.no_grad():
    ...     adj = PairAdjacency(5, 8, density=0.1)(torch.rand(4, 5))
    >>> tuple(adj.shape), bool(torch.equal(adj, adj.T)), float(adj.diagonal().abs().sum())
    ((4, 4), True, 0.0)
    """

    def __init__(self, in_features: int, hidden: int = 128, density: float = 0.5) -> None:
        super().__init__()
        self.left, self.right = nn.Linear(in_features, hidden), nn.Linear(in_features, hidden, bias=False)
        self.norm1, self.hidden, self.norm2 = _PairBatchNorm(hidden), nn.Linear(hidden, hidden), _PairBatchNorm(hidden)
        self.out = nn.Linear(hidden, 1)
        # start near the asked edge density instead of sigmoid(0) = 0.5, a complete graph that
        # averages every class together (our deviation from GCond, see docs/acceleration.md)
        density = min(max(density, 1e-4), 0.5)
        nn.init.constant_(self.out.bias, float(torch.logit(torch.tensor(density))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.size(0)
        h = torch.relu(self.norm1.pairs(self.left(x), self.right(x)))
        scores = self.out(torch.relu(self.norm2(self.hidden(h)))).view(n, n)
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


def class_gradients(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, onehot: torch.Tensor,
                    scale: torch.Tensor) -> torch.Tensor:
    r"""Per-class mean cross-entropy gradients of ``softmax(h @ weight.T + bias)`` w.r.t. ``weight`` (``(C, d)``,
    ``nn.Linear``'s layout): ``(C, C, d)``, class by output unit by feature.

    ``onehot`` is ``(n, C)``; ``scale = onehot / n_c`` picks and averages each class's rows. One
    ``(C*C, n) @ (n, d)`` product gives every class at once.

    >>> h, w, b = torch.rand(6, 3), torch.zeros(2, 3), torch.zeros(2)
    >>> y = torch.tensor([0, 0, 0, 1, 1, 1]); onehot = F.one_hot(y, 2).float()
    >>> g = class_gradients(h, w, b, onehot, onehot / 3)
    >>> ref = torch.autograd.functional.jacobian(lambda v: F.cross_entropy(h[:3] @ v.T + b, y[:3]), w)
    >>> tuple(g.shape), bool(torch.allclose(g[0], ref, atol=1e-6))
    ((2, 2, 3), True)
    """
    n, classes = onehot.shape
    residual = torch.softmax(F.linear(h, weight, bias), dim=1) - onehot
    blocks = (scale.unsqueeze(2) * residual.unsqueeze(1)).reshape(n, classes * classes)
    return (blocks.T @ h).view(classes, classes, h.size(1))


def matching_distance(real: torch.Tensor, syn: torch.Tensor) -> torch.Tensor:
    """GCond's "ours" distance between ``(..., outputs, d)`` gradients (its ``distance_wb`` on a weight in
    ``(out, in)`` layout): the sum over output units of ``1 - cos`` over ``d`` (with GCond's ``+1e-6`` in the
    denominator); 0 for identical gradients, one value per leading index.

    >>> g = torch.rand(2, 3, 4)
    >>> matching_distance(g, g).abs().max() < 1e-5, matching_distance(g, -g).round().tolist()
    (tensor(True), [6.0, 6.0])
    """
    dot = (real * syn).sum(dim=-1)
    return (1 - dot / (real.norm(dim=-1) * syn.norm(dim=-1) + 1e-6)).sum(dim=-1)


def _initial_rows(train: torch.Tensor, labels: torch.Tensor, budget: torch.Tensor,
                  generator: torch.Generator) -> torch.Tensor:
    """GCond's start: per class, real training nodes drawn without replacement (with, past the class size)."""
    rows = []
    for c, size in enumerate(budget.tolist()):
        members = train[(labels == c).nonzero().flatten()]
        if size == 0:
            continue
        pick = torch.randperm(members.numel(), generator=generator)[:size]
        if size > members.numel():
            pick = torch.cat([pick, torch.randint(members.numel(), (size - members.numel(),), generator=generator)])
        rows.append(members[pick.to(members.device)])
    return torch.cat(rows)


def match_gradients(graph: Any, x: torch.Tensor, train: torch.Tensor, labels: torch.Tensor, y_syn: torch.Tensor,
                    budget: torch.Tensor, config: Any, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Learn ``(X', A')`` for the synthetic labels ``y_syn`` (see the module docstring)."""
    device = x.device
    num_classes = budget.numel()
    h_real = torch_hops(graph, x, config.k)[-1][train]
    generator = torch.Generator().manual_seed(int(seed))
    feat = nn.Parameter(x[_initial_rows(train, labels, budget, generator)].clone())
    # bag-of-words features stay non-negative (our projection, not GCond's): zoo models row-normalise
    # their input, which a row with negative entries summing to ~0 would blow up
    nonnegative = bool((x >= 0).all())
    torch.manual_seed(int(seed))
    # the real graph's mean degree, spread over the synthetic pairs
    density = graph.num_edges / graph.num_nodes / max(1, int(budget.sum()) - 1)
    pge = PairAdjacency(x.size(1), config.hidden, density).to(device)
    opt_feat = torch.optim.Adam([feat], lr=config.lr_feat)
    opt_adj = torch.optim.Adam(pge.parameters(), lr=config.lr_adj)
    budget_dev = budget.to(device=device, dtype=x.dtype)
    counts = torch.bincount(labels, minlength=num_classes).to(x.dtype)
    onehot_real = F.one_hot(labels, num_classes).to(x.dtype)
    onehot_syn = F.one_hot(y_syn, num_classes).to(x.dtype)
    scale_real, scale_syn = onehot_real / counts.clamp_min(1), onehot_syn / budget_dev.clamp_min(1)
    coeff = budget_dev / budget_dev.max()  # GCond's n'_c / max n' (0 for a class without nodes)
    # fused Adam: one kernel per step for the thousands of tiny inner steps (CPU and CUDA have it)
    fused = True if device.type in ("cpu", "cuda") else None
    bound = 1.0 / math.sqrt(x.size(1))  # GCond's SGC init: uniform(-1/sqrt(d), 1/sqrt(d)) for W and b
    for epoch in range(config.epochs):
        weight = torch.empty(num_classes, x.size(1), device=device).uniform_(-bound, bound)
        bias = torch.empty(num_classes, device=device).uniform_(-bound, bound)
        opt_model = torch.optim.Adam([weight, bias], lr=config.lr_model, fused=fused)
        update_adj = epoch % 50 < 10
        feat.requires_grad_(not update_adj)  # only the updated side needs gradients
        for p in pge.parameters():
            p.requires_grad_(update_adj)
        opt = opt_adj if update_adj else opt_feat
        adj = pge(feat)
        for step in range(config.outer):
            h_syn = dense_propagate(adj, feat, config.k)
            g_real = class_gradients(h_real, weight, bias, onehot_real, scale_real)
            g_syn = class_gradients(h_syn, weight, bias, onehot_syn, scale_syn)
            loss = (coeff * matching_distance(g_real, g_syn)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if nonnegative and not update_adj:
                with torch.no_grad():
                    feat.clamp_(min=0)
            if step == config.outer - 1:
                break
            adj = pge(feat)  # the next outer step's adjacency; detached, it is also the inner steps' graph
            with torch.no_grad():
                h_fixed = dense_propagate(adj.detach(), feat.detach(), config.k)
            for _ in range(config.inner):
                residual = (torch.softmax(F.linear(h_fixed, weight, bias), dim=1) - onehot_syn) / h_fixed.size(0)
                weight.grad, bias.grad = residual.T @ h_fixed, residual.sum(dim=0)
                opt_model.step()
    feat.requires_grad_(True)
    for p in pge.parameters():
        p.requires_grad_(True)
    with torch.no_grad():
        adj = pge(feat)
    return feat.detach(), adj
