"""The MoE layer: router + expert bank + a pluggable dispatcher (local, EP, padded, LSH, NetMoE)."""
from __future__ import annotations

from typing import Iterator

import torch
import torch.nn as nn

from sgl.systems.moe.config import MoEConfig
from sgl.systems.moe.experts import ExpertBank
from sgl.systems.moe.router import Assignment, TopKRouter, balance_loss

__all__ = ["Dispatcher", "LocalDispatcher", "MoELayer", "moe_layers", "moe_aux_loss", "update_expert_bias"]


class Dispatcher:
    """How expert inputs reach the experts and outputs come back.

    ``exchange(rows, counts, bank)`` takes rows grouped by global expert (``counts[e]`` rows for
    expert ``e``) and returns the expert outputs in the same order; ``__call__`` gathers the rows
    of an :class:`Assignment`, exchanges them and combines ``y_t = sum_e w_{t,e} E_e(x_t)``.
    ``sent_rows`` counts the rows this rank put on the dispatch wire (for compression stats).
    """

    fuses_residual = False

    def __init__(self) -> None:
        self.sent_rows = 0
        self.routing_ranks = 1  # ranks that route their own tokens (capacity groups split over them)

    def global_counts(self, counts: torch.Tensor) -> torch.Tensor:
        """Per-expert pair counts summed over every rank that routes tokens (identity here)."""
        return counts

    def exchange(self, rows: torch.Tensor, counts: torch.Tensor, bank: ExpertBank) -> torch.Tensor:
        """Default: every expert is in this process, so the rows go straight to the bank."""
        self.sent_rows += rows.shape[0]
        return bank(rows, counts.tolist())

    def __call__(self, x: torch.Tensor, a: Assignment, bank: ExpertBank) -> torch.Tensor:
        out = self.exchange(x[a.token], a.counts, bank)
        return combine(x, a, out)


def combine(x: torch.Tensor, a: Assignment, out: torch.Tensor) -> torch.Tensor:
    """``y_t = sum over kept pairs (t, e) of w_{t,e} * out_{t,e}`` (dropped pairs contribute 0)."""
    return torch.zeros_like(x).index_add(0, a.token, out * a.weight.unsqueeze(1).to(out.dtype))


class LocalDispatcher(Dispatcher):
    """Every expert in this process (single-process training, or one EP rank of size 1): the
    base class's exchange, under the name the configs use."""


class MoELayer(nn.Module):
    r"""Top-k gated mixture of expert MLPs, a drop-in FFN for :class:`~sgl.systems.runtime.TinyLM`.

    .. math::
        y_t = \sum_{e \in \mathrm{TopK}(s_t + b)} w_{t,e}\, E_e(x_t), \qquad
        s_t = g(W_g x_t),\ g \in \{\mathrm{softmax}, \sigma\},

    (plus ``sigmoid(g^T x_t) S(x_t)`` when a shared expert ``S`` with gate ``g`` is given, as in
    Qwen2-MoE), with ``E_e`` a SwiGLU or GELU MLP, tokens beyond an expert's capacity dropped (``y_t`` gets
    no contribution from that expert), the balance loss ``aux_loss_coef * E * sum_e f_e P_e``
    left in :attr:`aux_loss` after each training forward, and the aux-loss-free bias ``b``
    updated by :func:`update_expert_bias`.  The dispatcher decides where experts run.

    >>> torch.manual_seed(0) and None
    >>> layer = MoELayer(MoEConfig(hidden_size=8, ffn_hidden_size=16, num_experts=4, top_k=2))
    >>> layer(torch.randn(2, 3, 8)).shape
    torch.Size([2, 3, 8])
    """

    def __init__(self, cfg: MoEConfig, dispatcher: Dispatcher | None = None, shared_expert: nn.Module | None = None,
                 shared_expert_gate: nn.Module | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        # Qwen2-MoE / DeepSeek: a dense expert every token takes, scaled by sigmoid(gate(x)).
        self.shared_expert = shared_expert
        self.shared_expert_gate = shared_expert_gate
        self.router = TopKRouter(cfg)
        self.experts = ExpertBank(cfg.num_experts, cfg.hidden_size, cfg.ffn_hidden_size, cfg.activation, cfg.seed,
                                   cfg.expert_impl)
        self.dispatcher: Dispatcher = dispatcher or LocalDispatcher()
        self.aux_loss = torch.zeros(())
        self.last_counts: torch.Tensor | None = None
        self.last_assignment: Assignment | None = None
        self.last_tokens: tuple[int, int] | None = None

    @property
    def fuses_residual(self) -> bool:
        return self.dispatcher.fuses_residual

    def forward(self, y: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        shape = y.shape
        x = y.reshape(-1, shape[-1])
        assign, scores = self.router(x, self.cfg.local_groups(self.dispatcher.routing_ranks, x.shape[0]))
        counts = self.dispatcher.global_counts(assign.counts)
        self.last_counts, self.last_assignment = counts, assign
        self.last_tokens = (shape[0], shape[1]) if y.dim() == 3 else (1, shape[0])
        if self.training and self.cfg.aux_loss_coef > 0:
            self.aux_loss = self.cfg.aux_loss_coef * balance_loss(scores, counts, self.cfg.top_k)
        else:
            self.aux_loss = scores.new_zeros(())
        shared = self._shared(x)
        if residual is not None and self.fuses_residual:
            if shared is not None:  # the shared output travels with the sample's residual stream
                residual = residual + shared.reshape(shape)
            return self.dispatcher.forward_fused(x, assign, self.experts, residual, shape)  # type: ignore[attr-defined]
        y = self.dispatcher(x, assign, self.experts)
        if shared is not None:
            y = y + shared
        y = y.reshape(shape)
        return y if residual is None else residual + y

    def _shared(self, x: torch.Tensor) -> torch.Tensor | None:
        if self.shared_expert is None:
            return None
        out = self.shared_expert(x)
        if self.shared_expert_gate is not None:
            out = torch.sigmoid(self.shared_expert_gate(x)) * out
        return out

    def __repr__(self) -> str:
        c = self.cfg
        return (f"MoELayer(experts={c.num_experts}, top_k={c.top_k}, gate={c.gate}, {c.activation}, "
                f"capacity={c.capacity_factor}, dispatcher={type(self.dispatcher).__name__})")


def moe_layers(model: nn.Module) -> Iterator[MoELayer]:
    """Every :class:`MoELayer` inside ``model``, in definition order."""
    return (m for m in model.modules() if isinstance(m, MoELayer))


def moe_aux_loss(model: nn.Module) -> torch.Tensor:
    """Sum of the balance losses the last training forward left in the model's MoE layers."""
    losses = [m.aux_loss for m in moe_layers(model)]
    return torch.stack(losses).sum() if losses else torch.zeros(())


@torch.no_grad()
def update_expert_bias(model: nn.Module) -> None:
    """DeepSeek-V3 aux-loss-free step on every layer, from the global counts of its last forward."""
    for layer in moe_layers(model):
        if layer.last_counts is not None:
            layer.router.update_bias(layer.last_counts)
