"""NetMoE inside the combine all-to-all: expert outputs (and each sample's residual stream) go to
the sample's *new* rank, in the same collective — no extra payload collective.

After the gate every rank all-gathers the kept (token, expert) lists (metadata, int64), so every
rank computes the same :func:`~sgl.systems.moe.netmoe.netmoe_placement` and the same index maps.
Gate weights ride along with the dispatched rows (one extra column) so the expert side sends
``w * E(x)``; the destination only adds rows: ``y = residual + sum_e w_e E_e(x)``.

The placement is solved off the critical path (``overlap=True``, the default, as the paper
overlaps it): each forward submits its routing counts to a background thread and uses the
placement solved from the *previous* forward's routing (the identity on the first); every rank
solves the same deterministic problem, so all ranks agree.  Placement never changes the loss or
the gradients, only which rank holds a sample.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from sgl import comm
from sgl.errors import ConfigError
from sgl.systems.moe.ep import EPDispatcher, ExpertParallel, all_to_all_autograd, run_grouped
from sgl.systems.moe.experts import ExpertBank
from sgl.systems.moe.netmoe_refine import netmoe_refined
from sgl.systems.moe.router import Assignment
from sgl.systems.moe.topology import Topology

__all__ = ["NetMoEDispatcher"]


class NetMoEDispatcher(EPDispatcher):
    """EP dispatch whose combine re-places samples (``fuses_residual``: the layer returns ``x + y``).

    ``nodes`` splits the EP ranks into nodes for the two-stage solver; ``enabled=False`` keeps
    the original placement through the same code path; ``count_residual=False`` leaves the
    residual rows out of the solver's objective (they still move); ``overlap=False`` solves this
    forward's placement from its own routing, on the critical path.
    """

    fuses_residual = True

    def __init__(self, ep: ExpertParallel, ctx: object, nodes: int = 1, enabled: bool = True,
                 count_residual: bool = True, refine: int = 0, overlap: bool = True) -> None:
        super().__init__(ep)
        self.ctx = ctx
        self.topo = Topology.of(ep.ep_size, nodes)
        self.enabled = enabled
        self.count_residual = count_residual
        self.refine = refine  # min-max swap rounds after the two stages (netmoe_refine)
        self.overlap = overlap  # solve in a background thread from this forward's routing, use it next time
        self.input_sample_ids: torch.Tensor | None = None
        self.last_placement: np.ndarray | None = None
        self.last_counts: np.ndarray | None = None  # [P*B, P] pairs of each sample slot per rank
        self.moved = 0  # samples that changed rank, summed over forwards
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None

    def _solve(self, counts: np.ndarray, s: int) -> np.ndarray:
        return netmoe_refined(counts, self.topo, tokens=s if self.count_residual else 0, rounds=self.refine)

    def _placement(self, counts: np.ndarray, s: int) -> np.ndarray:
        """This forward's placement: solved now, or (``overlap``) the one solved in the background
        from the previous forward's routing, while this forward's is being solved for the next."""
        slots = counts.shape[0]
        if not self.enabled:
            return np.arange(slots) // (slots // self.ep.ep_size)
        if not self.overlap:
            return self._solve(counts, s)
        place = self._pending.result() if self._pending is not None else None
        if place is None or place.shape[0] != slots:  # first forward, or another batch shape
            place = np.arange(slots) // (slots // self.ep.ep_size)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="netmoe")
        self._pending = self._pool.submit(self._solve, counts.copy(), s)
        return place

    def forward_fused(self, x: torch.Tensor, a: Assignment, bank: ExpertBank, residual: torch.Tensor,
                      shape: torch.Size) -> torch.Tensor:
        if len(shape) != 3:
            raise ConfigError("NetMoE places whole samples: the layer input must be [batch, seq, hidden]")
        b, s, h = shape
        p, el, rank, dev = self.ep.ep_size, bank.num_local, self.ep.ep_rank, x.device
        # Everyone learns everyone's kept pairs (sorted by expert, as dispatched).
        toks = [t.long().to(dev) for t in comm.all_gather(a.token, timeout=self.ep.timeout)]
        exps = [e.long().to(dev) for e in comm.all_gather(a.expert, timeout=self.ep.timeout)]
        slot_of = [r * b + t // s for r, t in enumerate(toks)]
        flat = torch.cat([sl * p + e // el for sl, e in zip(slot_of, exps)])
        counts = torch.bincount(flat, minlength=p * b * p).view(p * b, p).cpu().numpy()
        self.last_counts = counts
        place = self._placement(counts, s)
        self.last_placement = place
        self.moved += int((place != np.arange(p * b) // b).sum())
        dest = torch.as_tensor(place, device=dev)
        new_index = torch.empty(p * b, dtype=torch.long, device=dev)  # position of a slot on its new rank
        for q in range(p):
            mine = torch.nonzero(dest == q).flatten()
            new_index[mine] = torch.arange(mine.numel(), device=dev)
        # Dispatch: rows carry their gate weight as a last column.
        rows = torch.cat([x[a.token], a.weight.unsqueeze(1).to(x.dtype)], 1)
        e_counts = a.counts
        recv_counts = self.exchange_counts(e_counts)
        in_splits = e_counts.view(p, -1).sum(1).tolist()
        out_splits = recv_counts.sum(1).tolist()
        self.sent_rows += rows.shape[0]
        recv = all_to_all_autograd(rows, in_splits, out_splits, self.ep.ep_group, p)
        out = run_grouped(recv[:, :h], recv_counts, bank) * recv[:, h:]
        # Arrival order on rank q: for each source r, r's pairs on q's experts, in r's order.
        def arrival(q: int) -> tuple[torch.Tensor, torch.Tensor]:
            sel = [(exps[r] // el) == q for r in range(p)]
            slots = torch.cat([slot_of[r][sel[r]] for r in range(p)])
            pos = torch.cat([toks[r][sel[r]] % s for r in range(p)])
            return slots, pos

        # Send: outputs grouped by destination, then our residual samples bound there.
        slots_here, _ = arrival(rank)
        out_dest = dest[slots_here]
        local_slots = rank * b + torch.arange(b, device=dev)
        res_dest = dest[local_slots]
        src = torch.cat([out, residual.reshape(b * s, h)])
        send_idx, send_splits = [], []
        for q in range(p):
            o = torch.nonzero(out_dest == q).flatten()
            r_samples = torch.nonzero(res_dest == q).flatten()
            r_rows = (r_samples[:, None] * s + torch.arange(s, device=dev)).flatten() + out.shape[0]
            send_idx += [o, r_rows]
            send_splits.append(o.numel() + r_rows.numel())
        # Receive: from each q, its outputs for our samples, then its residual samples for us.
        targets, recv_splits = [], []
        for q in range(p):
            slots_q, pos_q = arrival(q)
            keep = dest[slots_q] == rank
            t_out = new_index[slots_q[keep]] * s + pos_q[keep]
            moved = q * b + torch.nonzero(dest[q * b + torch.arange(b, device=dev)] == rank).flatten()
            t_res = (new_index[moved][:, None] * s + torch.arange(s, device=dev)).flatten()
            targets += [t_out, t_res]
            recv_splits.append(t_out.numel() + t_res.numel())
        sent = src[torch.cat(send_idx)]
        got = all_to_all_autograd(sent, send_splits, recv_splits, self.ep.ep_group, p)
        y = residual.new_zeros(b * s, h).index_add(0, torch.cat(targets), got)
        # The samples this rank now holds, in their new order (global ids for the loss).
        ids_all = torch.cat(comm.all_gather(self.ctx.sample_ids, timeout=self.ep.timeout))  # type: ignore[attr-defined]
        self.input_sample_ids = self.ctx.sample_ids.clone()  # type: ignore[attr-defined]
        self.ctx.sample_ids = ids_all[torch.nonzero(dest == rank).flatten()]  # type: ignore[attr-defined]
        return y.view(b, s, h)
