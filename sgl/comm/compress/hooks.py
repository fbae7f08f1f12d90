"""Where the quantisers plug in: a DDP communication hook for gradients, and saved-tensor hooks
for activations kept for the backward pass (MEMO offload, TSPLIT).

* :func:`quantized_allreduce_hook` with a :class:`QuantHookState` -- register it with
  ``ddp_model.register_comm_hook(state, quantized_allreduce_hook)``. Each rank encodes its
  gradient bucket (:class:`~sgl.comm.compress.TinyScriptQuantizer` or
  :class:`~sgl.comm.compress.UniformQuantizer`), all ranks all-gather the fixed-size payloads,
  and each rank decodes and averages them: ``world`` payloads of ``bits/8`` bytes a value
  instead of one float32 all-reduce. The state counts the bytes each rank sent.
* :func:`quantized_saved_tensors` -- a context manager around forward passes: every float tensor
  autograd saves (of at least ``min_numel`` values) is kept as its ``bits``-bit payload and
  decoded when backward needs it.

The hook uses ``torch.distributed`` directly, because DDP's hook API demands a ``Future``
(``sgl.comm``'s collectives are blocking); it runs only inside an initialised process group.

>>> import torch
>>> from sgl.comm.compress import TinyScriptQuantizer
>>> lin = torch.nn.Linear(64, 64)
>>> with quantized_saved_tensors(TinyScriptQuantizer(8), min_numel=16):
...     loss = torch.tanh(lin(torch.randn(32, 64))).sum()
>>> loss.backward()
>>> lin.weight.grad.shape
torch.Size([64, 64])
"""
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import torch
import torch.distributed as dist

from sgl.errors import CommError

__all__ = ["QuantHookState", "quantized_allreduce_hook", "quantized_saved_tensors"]


@dataclass
class QuantHookState:
    """What :func:`quantized_allreduce_hook` needs and records (no ``__future__`` annotations in this
    module: DDP checks the hook's ``bucket`` annotation is the real ``dist.GradBucket``).

    Args:
        quantizer: a :class:`~sgl.comm.compress.TinyScriptQuantizer` / ``UniformQuantizer``.
        process_group: the DDP group (``None``: the world).
        track_error: also record the squared error of this rank's decoded gradient (an extra
            decode per bucket; for benchmarks).
    """

    quantizer: Any
    process_group: Optional[Any] = None
    track_error: bool = False
    bytes_sent: int = 0
    buckets: int = 0
    sq_error: float = 0.0
    sq_norm: float = 0.0

    @property
    def relative_mse(self) -> float:
        """``sum ||Q(g) - g||^2 / sum ||g||^2`` over the tracked buckets."""
        return self.sq_error / self.sq_norm if self.sq_norm > 0 else 0.0


def quantized_allreduce_hook(state: QuantHookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the mean of every rank's quantised gradient bucket."""
    if not dist.is_available() or not dist.is_initialized():
        raise CommError("quantized_allreduce_hook runs inside DDP: initialise a process group first")
    group = state.process_group if state.process_group is not None else dist.group.WORLD
    world = dist.get_world_size(group)
    grad = bucket.buffer()
    q = state.quantizer
    payload = q.encode(grad)
    state.bytes_sent += payload.numel()
    state.buckets += 1
    if state.track_error:
        mine = q.decode(payload, grad.numel()).to(grad.dtype)
        state.sq_error += float((mine - grad).pow(2).sum())
        state.sq_norm += float(grad.pow(2).sum())
    gathered = torch.empty(world * payload.numel(), dtype=torch.uint8, device=grad.device)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    fut = gather(gathered, payload, group=group, async_op=True).get_future()

    def average(_: torch.futures.Future) -> torch.Tensor:
        parts = gathered.view(world, -1)
        total = torch.zeros(grad.numel(), dtype=torch.float32, device=grad.device)
        for part in parts:
            total += q.decode(part, grad.numel())
        grad.copy_((total / world).to(grad.dtype))
        return grad

    return fut.then(average)


@contextmanager
def quantized_saved_tensors(quantizer: Any, min_numel: int = 1024) -> Iterator[None]:
    """Keep the float tensors autograd saves inside the block as ``quantizer`` payloads."""

    def pack(t: torch.Tensor) -> Any:
        # parameters (leaves that need grad) are not activations: keep them exact
        if not t.is_floating_point() or t.numel() < min_numel or (t.is_leaf and t.requires_grad):
            return t
        return (quantizer.encode(t), t.shape, t.dtype)

    def unpack(packed: Any) -> torch.Tensor:
        if isinstance(packed, torch.Tensor):
            return packed
        payload, shape, dtype = packed
        return quantizer.decode(payload, int(torch.Size(shape).numel())).reshape(shape).to(dtype)

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield
