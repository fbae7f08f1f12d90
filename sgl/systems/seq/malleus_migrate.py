"""Live migration of model states between two Malleus plans, over :mod:`sgl.comm` point-to-point.

Every rank computes the same transfer list (:func:`transfer_list`) from the old and the new
:class:`~sgl.systems.seq.malleus_shard.Holding` of every rank: for each parameter (canonical order)
and each new holder, the part of its new shard along the split dimension is cut at the old
holders' boundaries; a piece the rank already held is copied locally, any other piece comes from
the lowest old holder of it.  A transfer carries the parameter *and* Adam's two moments stacked
in one tensor, so training continues exactly where it stopped.  The ranks walk the list in the
same order with blocking send / recv: the earliest unfinished transfer always has both of its
ranks waiting on it, so the walk cannot deadlock.

>>> from sgl.systems.seq.malleus_shard import param_layout, _tiny
>>> layout = param_layout(_tiny())
>>> old = {0: Holding(0, 0, 1, [0, 1], True, False), 1: Holding(0, 0, 1, [], False, True)}
>>> new = {0: Holding(0, 0, 1, [0], True, False), 1: Holding(0, 0, 1, [1], False, True)}
>>> moves = [t for t in transfer_list(layout, old, new) if t.src != t.dst]
>>> sorted({(t.spec.unit, t.src, t.dst) for t in moves})
[(1, 0, 1)]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from sgl import comm
from sgl.systems.seq.malleus_shard import Holding, ParamSpec

__all__ = ["Transfer", "transfer_list", "migrate_states"]


@dataclass(frozen=True)
class Transfer:
    """Elements ``[lo, hi)`` of ``spec``'s split dimension go from rank ``src`` to rank ``dst``."""

    spec: ParamSpec
    src: int
    dst: int
    lo: int
    hi: int

    def numel(self) -> int:
        n = self.spec.shape[self.spec.split_dim]
        return self.spec.numel // n * (self.hi - self.lo)


def _holders(holdings: Dict[int, Optional[Holding]], spec: ParamSpec) -> List[Tuple[int, int, int]]:
    out = []
    for rank in sorted(holdings):
        h = holdings[rank]
        if h is not None and spec.unit in h.units:
            out.append((rank, *h.interval(spec)))
    return out


def transfer_list(layout: Sequence[ParamSpec], old: Dict[int, Optional[Holding]],
                  new: Dict[int, Optional[Holding]]) -> List[Transfer]:
    """Every piece each new holder needs, with its source (itself when it held the piece)."""
    out: List[Transfer] = []
    for spec in layout:
        sources = _holders(old, spec)
        for dst, a, b in _holders(new, spec):
            cuts = sorted({a, b} | {x for _, lo, hi in sources for x in (lo, hi) if a < x < b})
            for u, v in zip(cuts[:-1], cuts[1:]):
                covering = [r for r, lo, hi in sources if lo <= u and v <= hi]
                if not covering:
                    raise AssertionError(f"no old holder of {spec.unit}/{spec.name}[{u}:{v}]")
                src = dst if dst in covering else covering[0]
                out.append(Transfer(spec, src, dst, u, v))
    return out


def _piece(t: Transfer, interval: Tuple[int, int]) -> Tuple[slice, ...]:
    """``t``'s piece as an index into a shard that starts at ``interval[0]``."""
    lo = t.lo - interval[0]
    cut = slice(lo, lo + t.hi - t.lo)
    full = slice(None)
    return (cut,) + (full,) * (len(t.spec.shape) - 1) if t.spec.split_dim == 0 else (full, cut)


def migrate_states(rank: int, layout: Sequence[ParamSpec], old: Dict[int, Optional[Holding]],
                   new: Dict[int, Optional[Holding]], states: Dict[tuple, torch.Tensor],
                   device: torch.device, dtype: torch.dtype) -> Tuple[Dict[tuple, torch.Tensor], int]:
    """Move ``states`` (``(unit, name) -> stacked [param, exp_avg, exp_avg_sq]`` of this rank's old
    shards) to the new holdings; this rank's new states and the elements it received."""
    mine_old, mine_new = old.get(rank), new.get(rank)
    out: Dict[tuple, torch.Tensor] = {}
    if mine_new is not None:
        for spec in layout:
            if spec.unit in mine_new.units:
                shape = list(spec.shape)
                lo, hi = mine_new.interval(spec)
                shape[spec.split_dim] = hi - lo
                out[(spec.unit, spec.name)] = torch.empty([3] + shape, device=device, dtype=dtype)
    received = 0
    for t in transfer_list(layout, old, new):
        key = (t.spec.unit, t.spec.name)
        if rank not in (t.src, t.dst):
            continue
        if t.src == t.dst:
            src = states[key][(slice(None),) + _piece(t, mine_old.interval(t.spec))]
            out[key][(slice(None),) + _piece(t, mine_new.interval(t.spec))] = src
        elif rank == t.src:
            comm.send(states[key][(slice(None),) + _piece(t, mine_old.interval(t.spec))].contiguous(), t.dst)
        else:
            view = out[key][(slice(None),) + _piece(t, mine_new.interval(t.spec))]
            got = comm.recv(torch.empty_like(view).contiguous(), t.src)
            view.copy_(got)
            received += 3 * t.numel()
    return out, received
