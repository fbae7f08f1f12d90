r"""CELU-VFL (Fu et al., PVLDB 2022): cached activations and derivatives, reused for local updates.

Wide-area round trips dominate vertical training, so both parties keep a **workset table**
keyed by batch id: the rows, the exchanged activations ``h`` and derivatives ``g``, the
insertion time and a use count. After each round trip a party runs ``local_steps`` local updates
(the deterministic mode; the original runs them in a concurrent thread): it draws a cached batch
uniformly, excluding the last ``W - 1`` drawn; an entry is evicted when its staleness (updates
since insertion, local ones included) reaches ``W * R``, and removed after ``R`` uses.

Instance weighting keeps stale entries from hurting: :math:`w_i=\cos(a_i, b_i)\,\mathbb 1[\cos\ge\xi]`,
where the guest compares the current :math:`\partial L/\partial h_i` with the cached one, and
the host compares its recomputed activation with the cached one; no weighting when ``ξ`` is
outside ``(-1, 1)``. :func:`instance_weights` computes it.

Example:
    >>> import torch
    >>> ws = Workset(window=2, max_uses=2, seed=0)
    >>> ws.add(0, rows=torch.arange(4), h=torch.zeros(4, 2), g=torch.ones(4, 2), now=0)
    >>> ws.draw(now=1).batch_id, len(ws)
    (0, 1)
    >>> instance_weights(torch.tensor([[1., 0.], [0., 1.]]), torch.tensor([[1., 0.], [1., 0.]]), xi=0.5).tolist()
    [1.0, 0.0]
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Dict, Optional

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["CacheEntry", "Workset", "instance_weights"]


@dataclass
class CacheEntry:
    """One cached batch: rows, activations, derivatives, insertion time and uses."""

    batch_id: int
    rows: Any
    h: Any
    g: Any
    inserted: int
    uses: int = 0


class Workset:
    """The workset table of one party (see the module docstring): ``window`` W, ``max_uses`` R."""

    def __init__(self, window: int = 5, max_uses: int = 5, seed: int = 0) -> None:
        self.window, self.max_uses = int(window), int(max_uses)
        self._entries: Dict[int, CacheEntry] = {}
        self._recent: deque = deque(maxlen=max(self.window - 1, 0))
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, batch_id: int, rows: Any, h: Any, g: Any, now: int) -> None:
        self._entries[int(batch_id)] = CacheEntry(int(batch_id), rows, h, g, int(now))

    def _evict(self, now: int) -> None:
        limit = self.window * self.max_uses
        for key in [k for k, e in self._entries.items() if now - e.inserted >= limit or e.uses >= self.max_uses]:
            del self._entries[key]

    def draw(self, now: int) -> Optional[CacheEntry]:
        """A uniformly drawn usable entry (its use counted), or ``None`` when none is left."""
        self._evict(now)
        keys = [k for k in self._entries if k not in self._recent] or list(self._entries)
        if not keys:
            return None
        entry = self._entries[keys[int(self._rng.integers(len(keys)))]]
        entry.uses += 1
        self._recent.append(entry.batch_id)
        return entry


def instance_weights(current: torch.Tensor, cached: torch.Tensor, xi: float) -> torch.Tensor:
    """``[B]`` CELU weights ``cos(current_i, cached_i) * 1[cos >= xi]``; ones when ``xi`` is outside (-1, 1)."""
    if not -1 < xi < 1:
        return torch.ones(current.shape[0], dtype=current.dtype, device=current.device)
    cos = F.cosine_similarity(current.flatten(1), cached.flatten(1), dim=1)
    return torch.where(cos >= xi, cos, torch.zeros_like(cos))
