"""Gaussian noise for the next batch, drawn on a background thread while the active party waits.

Every Gaussian-noise defense (ProjPert, Marvell) draws a ``[B, d]`` standard normal per batch;
on a small model that draw is a large part of the defense's cost (about half of ProjPert's).
The noise does not depend on the gradients, so the active party can draw the next batch's while
it waits for the passive parties' activations: :class:`NoiseAhead` keeps one draw in flight on a
single worker thread (torch releases the GIL inside the op) with its own seeded generator, so the
sequence of draws is deterministic and never races the party's other generators. On the CPU it
also loads ProjPert's numba kernel when it is built (once per process, about a second even from
numba's disk cache), so that cost lands in the party's setup and no batch pays it.

>>> import torch
>>> ahead = NoiseAhead(seed=0)
>>> ahead.prefetch((4, 3))
>>> z = ahead.take((4, 3))
>>> z.shape, torch.equal(z, torch.randn(4, 3, generator=torch.Generator().manual_seed(0)))
(torch.Size([4, 3]), True)
>>> ahead.take((2, 3)).shape          # nothing prefetched for this shape: drawn now
torch.Size([2, 3])
>>> ahead.close()
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Optional, Tuple

import torch

from sgl.federated._projpert_numba import load_host_kernel

__all__ = ["NoiseAhead"]


class NoiseAhead:
    """One standard-normal draw kept in flight for the shape the next batch is expected to have.

    Args:
        seed: seed of the generator the draws come from (owned by this object).
        device: where the noise is drawn (the party's device).
        dtype: its dtype.
    """

    def __init__(self, seed: int, device: Optional[torch.device] = None, dtype: torch.dtype = torch.float32) -> None:
        self.device = torch.device(device) if device is not None else torch.empty(0).device
        self.dtype = dtype
        self.generator = torch.Generator(device=self.device).manual_seed(int(seed))
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pending: Optional[Tuple[Tuple[int, ...], Future]] = None
        self.hits = 0
        self.misses = 0
        if self.device.type == "cpu":
            load_host_kernel(dtype)

    def _draw(self, shape: Tuple[int, ...]) -> torch.Tensor:
        return torch.randn(shape, generator=self.generator, device=self.device, dtype=self.dtype)

    def prefetch(self, shape) -> None:
        """Start drawing a ``shape`` normal in the background (no-op if one is already in flight)."""
        if self._pending is not None:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="sgl-noise")
        shape = tuple(int(s) for s in shape)
        self._pending = (shape, self._pool.submit(self._draw, shape))

    def take(self, shape) -> torch.Tensor:
        """A ``shape`` standard normal: the prefetched one when it has the shape, or its first rows
        when only the leading (batch) dimension is smaller (an epoch's last, short batch); else drawn now.

        A prefetched draw that cannot serve is waited for and dropped, so the generator's sequence
        depends only on the sequence of shapes asked for.
        """
        shape = tuple(int(s) for s in shape)
        if self._pending is not None:
            want, fut = self._pending
            self._pending = None
            z = fut.result()
            if want == shape:
                self.hits += 1
                return z
            if len(want) == len(shape) and want[1:] == shape[1:] and len(shape) and shape[0] <= want[0]:
                self.hits += 1   # i.i.d. rows: the first shape[0] rows are a standard normal of that shape
                return z[:shape[0]]
        self.misses += 1
        return self._draw(shape)

    def close(self) -> None:
        """Finish any draw in flight and stop the worker thread."""
        if self._pending is not None:
            self._pending[1].result()
            self._pending = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
