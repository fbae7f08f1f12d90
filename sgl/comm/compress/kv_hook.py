"""A DDP communication hook for sparse embedding gradients: key-value codecs on the wire.

``nn.Embedding(..., sparse=True)`` under :class:`~torch.nn.parallel.DistributedDataParallel`
hands its gradient to the hook as a sparse COO bucket: the rows a rank touched (keys) and their
gradient rows (values). :func:`sparse_kv_hook` sends that bucket through a key-value codec
(:class:`~sgl.comm.compress.SketchMLCodec`, :class:`~sgl.comm.compress.Uniform8Codec`,
:class:`~sgl.comm.compress.FP32Codec`, ...): each rank encodes its coalesced rows, all ranks
all-gather the variable-size payloads (sizes first, then one padded gather), and each rank
decodes every payload and averages the rows into a sparse gradient. Dense buckets (the rest of
the model) keep DDP's float32 mean.

The hook waits for its collectives before it returns (a completed ``Future``): under Gloo, work
chained through future callbacks can reach the wire in a different bucket order on each rank.

:class:`KVHookState` counts, per rank, the payload bytes sent, what the uncompressed
:class:`~sgl.comm.compress.FP32Codec` would have sent for the same rows, and the dense bytes.

Register it with ``ddp.register_comm_hook(KVHookState(SketchMLCodec()), sparse_kv_hook)``, or
through ``sgl.tasks.grad_compress.register_grad_compress(ddp, "sketchml")``.

>>> from sgl.comm.compress import SketchMLCodec
>>> state = KVHookState(SketchMLCodec())
>>> state.bytes_sent, state.compression
(0, 1.0)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch
import torch.distributed as dist

from sgl.comm.compress.codec import KVCodec
from sgl.errors import CommError, ConfigError

__all__ = ["KVHookState", "sparse_kv_hook"]

_HEADER_BYTES = 24      # FP32Codec's header: what "uncompressed key-value" costs beyond the rows


@dataclass
class KVHookState:
    """The codec :func:`sparse_kv_hook` uses for sparse buckets, and its byte counters (this rank).

    Attributes:
        codec: the key-value codec of the sparse rows.
        process_group: the group DDP reduces over (``None``: the default group).
        bytes_sent: payload bytes of this rank's sparse buckets.
        bytes_fp32: what float32 key-value (int64 keys, float32 rows) would have sent.
        dense_bytes: float32 bytes of the dense buckets (all-reduced as DDP does).
        sparse_buckets / dense_buckets: buckets seen.
    """

    codec: KVCodec
    process_group: Optional[Any] = None
    bytes_sent: int = 0
    bytes_fp32: int = 0
    dense_bytes: int = 0
    sparse_buckets: int = 0
    dense_buckets: int = 0
    _extra: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.codec, KVCodec):
            raise ConfigError(f"KVHookState needs a key-value codec (sgl.comm.compress.build_codec('sketchml')), "
                              f"got {type(self.codec).__name__}")

    @property
    def compression(self) -> float:
        """``bytes_fp32 / bytes_sent`` over the sparse buckets so far (1.0 before any)."""
        return self.bytes_fp32 / self.bytes_sent if self.bytes_sent else 1.0


def _done(value: torch.Tensor) -> torch.futures.Future:
    fut: torch.futures.Future = torch.futures.Future()
    fut.set_result(value)
    return fut


def _gather_payloads(payload: torch.Tensor, group: Any, world: int) -> list:
    """Every rank's variable-size ``uint8`` payload, in rank order."""
    size = torch.tensor([payload.numel()], dtype=torch.int64, device=payload.device)
    sizes = torch.empty(world, dtype=torch.int64, device=payload.device)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(sizes, size, group=group)
    longest = int(sizes.max())
    padded = torch.zeros(longest, dtype=torch.uint8, device=payload.device)
    padded[: payload.numel()] = payload
    gathered = torch.empty(world * longest, dtype=torch.uint8, device=payload.device)
    gather(gathered, padded, group=group)
    rows = gathered.view(world, longest)
    return [rows[r, : int(sizes[r])] for r in range(world)]


def sparse_kv_hook(state: KVHookState, bucket):   # no annotations: DDP checks them against dist.GradBucket
    """DDP hook: sparse buckets travel as ``state.codec`` payloads and are averaged; dense ones as float32."""
    if not dist.is_available() or not dist.is_initialized():
        raise CommError("sparse_kv_hook runs inside DDP: initialise a process group first")
    group = state.process_group if state.process_group is not None else dist.group.WORLD
    world = dist.get_world_size(group)
    grad = bucket.buffer()
    if not grad.is_sparse:
        state.dense_buckets += 1
        state.dense_bytes += grad.numel() * 4
        dist.all_reduce(grad, group=group)
        return _done(grad.div_(world))
    state.sparse_buckets += 1
    grad = grad.coalesce()
    keys = grad.indices()[0]
    values = grad.values()
    if values.dim() != 2:
        raise CommError(f"sparse_kv_hook handles row-sparse gradients (nn.Embedding(sparse=True)); got values of "
                        f"shape {tuple(values.shape)}")
    payload = state.codec.encode(keys, values.float())
    state.bytes_sent += int(payload.numel())
    state.bytes_fp32 += _HEADER_BYTES + keys.numel() * (8 + 4 * values.shape[1])
    all_keys, all_values = [], []
    for part in _gather_payloads(payload, group, world):
        k, v, _ = state.codec.decode(part)
        all_keys.append(k.to(grad.device))
        all_values.append(v.to(device=grad.device, dtype=values.dtype).reshape(-1, values.shape[1]))
    index = torch.cat(all_keys).unsqueeze(0)
    total = torch.sparse_coo_tensor(index, torch.cat(all_values) / world, grad.shape, device=grad.device,
                                    check_invariants=False)
    return _done(total.coalesce())
