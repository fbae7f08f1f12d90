"""One Malleus pipeline's GPipe schedule over :mod:`sgl.comm` send / recv, for stages of any TP size.

Stage ``j`` of a pipeline is a TP group; its leader (first member) sends each micro-batch's
activations to every member of stage ``j + 1`` and, in the backward pass, each input gradient to
every member of stage ``j - 1``.  All forwards run, then all backwards in reverse order (GPipe);
each micro-batch's loss is scaled by ``1 / B`` so the pipelines' summed gradients are the global
batch's mean.

Sends go through a :class:`BackgroundSender` under Gloo: one thread posts them in order while the
stage computes on, so a stage may run ahead of its neighbour by a whole micro-batch queue instead
of waiting at every hand-off for the receiver to post its recv (on a shared CPU such a wait also
costs a trip through the scheduler).  Per destination the order of sends is the order of recvs,
which is all point-to-point matching needs.  Under NCCL the sends stay on the calling thread: one
communicator must see the same order of operations on every rank.

>>> sender = BackgroundSender(enabled=False)        # synchronous: send now, nothing to flush
>>> sender.flush()
"""
from __future__ import annotations

import queue
import threading
from typing import Callable, List, Optional, Sequence, Tuple

import torch

from sgl import comm
from sgl.errors import CommError
from sgl.systems.runtime.tiny_lm import lm_loss

__all__ = ["BackgroundSender", "pipeline_step"]


class BackgroundSender:
    """Blocking :func:`sgl.comm.send` calls run in order on one thread; :meth:`flush` waits for them."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._queue: "queue.Queue[Optional[Tuple[torch.Tensor, int]]]" = queue.Queue()
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None
        if enabled:
            self._thread = threading.Thread(target=self._run, name="malleus-sender", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    comm.send(item[0], item[1])
            except BaseException as exc:  # noqa: BLE001 -- handed to the main thread by flush()
                self._error = exc
            finally:
                self._queue.task_done()

    def send(self, tensor: torch.Tensor, dst: int) -> None:
        if not self.enabled:
            comm.send(tensor, dst)
            return
        self._queue.put((tensor, dst))

    def flush(self) -> None:
        """Wait until every queued send is handed over; re-raise a send's error."""
        if self.enabled:
            self._queue.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise CommError(f"a background pipeline send failed: {error}") from error

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(5.0)
            self._thread = None


def pipeline_step(stage: torch.nn.Module, stages: Sequence[Sequence[int]], j: int, rank: int,
                  micro: List[torch.Tensor], total_micro_batches: int, shape: Tuple[int, ...],
                  device: torch.device, dtype: torch.dtype, timed: Callable, sender: BackgroundSender) -> float:
    """Forward and backward of this rank's ``micro``-batches as stage ``j`` of ``stages``; the summed
    scaled loss if this rank leads the last stage (else 0).  ``timed(fn)`` runs and times compute."""
    last, leader = j == len(stages) - 1, stages[j][0] == rank
    saved, loss_sum = [], 0.0
    for x in micro:
        inp = x
        if j > 0:
            inp = comm.recv(torch.empty(shape, device=device, dtype=dtype), stages[j - 1][0]).requires_grad_()
        out = timed(lambda: stage(inp))
        if last:
            out = timed(lambda: lm_loss(out, x) / total_micro_batches)
            loss_sum += float(out.detach()) if leader else 0.0
        elif leader:
            for d in stages[j + 1]:
                sender.send(out.detach(), d)
        saved.append((inp, out))
    for inp, out in reversed(saved):
        grad = None
        if not last:
            grad = comm.recv(torch.empty(shape, device=device, dtype=dtype), stages[j + 1][0])
        timed(lambda: out.backward(grad))
        if j > 0 and leader:
            for d in stages[j - 1]:
                sender.send(inp.grad, d)
    sender.flush()
    return loss_sum
