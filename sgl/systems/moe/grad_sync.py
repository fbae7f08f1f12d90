"""Gradient synchronisation bucketed and overlapped with backward (DDP-style hooks).

:class:`BucketedGradSync` cuts the parameters (in reverse order: the order backward produces
their gradients) into buckets of about ``bucket_mb`` MiB.  A post-accumulate-grad hook on each
parameter counts the gradients that have arrived; when a bucket is complete its gradients are
copied into one flat buffer and an asynchronous all-reduce starts while backward goes on with
the earlier layers.  :meth:`finish` (after ``backward``) waits for every bucket, launches those
whose parameters got no gradient this step (their gradients count as zeros, on every rank), and
copies the sums back.  The result equals one flat all-reduce after backward (sums are taken
element by element either way).
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch
import torch.nn as nn

from sgl import comm
from sgl.errors import CommError

__all__ = ["BucketedGradSync", "all_reduce_flat"]


def all_reduce_flat(params: list[nn.Parameter], group: Any = None, timeout: float | None = None) -> None:
    """One all-reduce (sum) of every gradient in ``params``, flattened into one buffer (the reference)."""
    if not params:
        return
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    comm.all_reduce(flat, group=group, timeout=timeout)
    offset = 0
    for p in params:
        n = p.grad.numel()
        p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
        offset += n


class _Bucket:
    def __init__(self, params: list[nn.Parameter]) -> None:
        self.params = params
        self.ready = 0
        self.work: Any = None
        self.buf: torch.Tensor | None = None


class BucketedGradSync:
    """Sum the gradients of ``params`` over ``group`` in buckets, each launched as soon as backward
    has produced all of its gradients (and every earlier bucket has been launched).

    >>> import torch.nn as nn
    >>> net = nn.Linear(4, 2)
    >>> sync = BucketedGradSync(list(net.parameters()), bucket_mb=1.0)  # one process: sums are identities
    >>> net(torch.ones(3, 4)).sum().backward(); sync.finish()
    >>> net.bias.grad
    tensor([3., 3.])
    """

    def __init__(self, params: list[nn.Parameter], group: Any = None, bucket_mb: float = 25.0,
                 timeout: float | None = None) -> None:
        if not bucket_mb > 0:
            raise CommError(f"BucketedGradSync: bucket_mb must be > 0, got {bucket_mb!r}")
        self.group, self.timeout = group, timeout
        self.buckets: list[_Bucket] = []
        self._of: dict[int, _Bucket] = {}
        cap, cur, size = bucket_mb * 2 ** 20, [], 0.0
        for p in reversed([p for p in params if p.requires_grad]):
            cur.append(p)
            size += p.numel() * p.element_size()
            if size >= cap:
                self.buckets.append(_Bucket(cur))
                cur, size = [], 0.0
        if cur:
            self.buckets.append(_Bucket(cur))
        self._handles = []
        self._next = 0
        for b in self.buckets:
            for p in b.params:
                self._of[id(p)] = b
                self._handles.append(p.register_post_accumulate_grad_hook(self._hook))

    def _hook(self, p: torch.Tensor) -> None:
        b = self._of[id(p)]
        b.ready += 1
        # Launch in bucket order only, so every rank issues the same collectives in the same order.
        while self._next < len(self.buckets) and self.buckets[self._next].ready == len(self.buckets[self._next].params):
            self._launch(self.buckets[self._next])
            self._next += 1

    def _launch(self, b: _Bucket) -> None:
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in b.params]
        b.buf = comm.to_wire(torch.cat([g.reshape(-1) for g in grads]), self.group)
        if comm.is_initialized() and comm.get_world_size(self.group) > 1:
            import torch.distributed as dist

            b.work = dist.all_reduce(b.buf, group=self.group, async_op=True)

    def finish(self) -> None:
        """Wait for every bucket (launching any that backward left incomplete) and write the sums back."""
        seconds = self.timeout if self.timeout is not None else 1800.0
        for b in self.buckets:  # the same order on every rank: incomplete ones launch in bucket order
            if b.buf is None:
                self._launch(b)
            if b.work is not None and b.work.wait(timeout=timedelta(seconds=seconds)) is False:
                raise CommError(f"BucketedGradSync: a gradient all-reduce timed out after {seconds:g}s; "
                                "a peer probably stopped before its backward finished")
            offset = 0
            for p in b.params:
                n = p.numel()
                piece = b.buf[offset:offset + n].view_as(p).to(p.device)
                if p.grad is None:
                    p.grad = piece.clone()
                else:
                    p.grad.copy_(piece)
                offset += n
            b.ready, b.work, b.buf = 0, None, None
        self._next = 0

    def remove(self) -> None:
        """Take the hooks off the parameters."""
        for h in self._handles:
            h.remove()
        self._handles = []
