"""Compressed gradient all-reduce for the multi-process trainers (``sgl train --procs N --grad-compress``).

DDP averages every gradient bucket with one float32 all-reduce. A communication hook replaces that:

* ``tinyscript``: each rank sends its bucket as ``bits``-bit TinyScript codes (Weibull-fitted
  non-uniform levels, stochastic rounding; :class:`sgl.comm.compress.TinyScriptQuantizer`), all
  ranks all-gather the codes and average the decoded buckets;
* ``uniform``: the same with uniform ``bits``-bit levels (:class:`~sgl.comm.compress.UniformQuantizer`),
  the baseline TinyScript is measured against;
* ``sketchml``: sparse gradient buckets (``nn.Embedding(sparse=True)``) travel as SketchML key-value
  payloads (:func:`sgl.comm.compress.sparse_kv_hook`); dense buckets keep the float32 mean;
* ``powersgd``: torch's own PowerSGD hook (rank ``powersgd_rank`` approximations with error
  feedback; ``torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook``);
* ``none``: DDP's float32 all-reduce.

Example (one process: nothing to compress):
    >>> from sgl.tasks.grad_compress import GRAD_COMPRESSORS, check_grad_compress
    >>> GRAD_COMPRESSORS
    ('none', 'tinyscript', 'uniform', 'powersgd', 'sketchml')
    >>> check_grad_compress("tinyscript", bits=4, rank=1)
    'tinyscript'
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from sgl._checks import check_int
from sgl.errors import ConfigError

__all__ = ["GRAD_COMPRESSORS", "check_grad_compress", "register_grad_compress", "grad_compress_report"]

#: what ``--grad-compress`` accepts
GRAD_COMPRESSORS = ("none", "tinyscript", "uniform", "powersgd", "sketchml")


def check_grad_compress(name: str, bits: int = 4, rank: int = 1) -> str:
    """``name`` checked (and ``bits`` / ``rank`` with it); a clear error names the choices."""
    if not isinstance(name, str) or name.lower() not in GRAD_COMPRESSORS:
        raise ConfigError(f"grad_compress must be one of {', '.join(GRAD_COMPRESSORS)}, got {name!r}")
    name = name.lower()
    if name in ("tinyscript", "uniform"):
        from sgl.comm.compress import check_bits

        check_bits(bits, f"grad_compress={name}")
    if name == "powersgd":
        check_int(rank, "powersgd_rank (the rank of PowerSGD's low-rank approximation)", 1)
    return name


def register_grad_compress(net: Any, name: str, bits: int = 4, rank: int = 1, seed: int = 0) -> Optional[Any]:
    """Register ``name``'s communication hook on the DDP module ``net``; returns the hook's state
    (``None`` for ``none``). Every rank must call it with the same arguments."""
    name = check_grad_compress(name, bits, rank)
    if name == "none":
        return None
    if not hasattr(net, "register_comm_hook"):
        raise ConfigError(f"grad_compress={name} compresses the gradient all-reduce of several processes; this run "
                          "has one (sgl train --procs N, or torchrun)")
    if name == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

        # start at the first step: the warm-up iterations of torch's default would hide the cost
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=rank,
                                            start_powerSGD_iter=2, random_seed=seed)
        hook = powerSGD_hook.powerSGD_hook
        if _backend() == "gloo":
            hook = _in_bucket_order(hook)
        net.register_comm_hook(state, hook)
        return state
    if name == "sketchml":
        from sgl.comm.compress import KVHookState, SketchMLCodec, sparse_kv_hook

        state = KVHookState(SketchMLCodec(seed=seed))
        net.register_comm_hook(state, sparse_kv_hook)
        return state
    from sgl.comm.compress import QuantHookState, build_quantizer, quantized_allreduce_hook

    state = QuantHookState(build_quantizer(name, bits, seed=seed))
    net.register_comm_hook(state, quantized_allreduce_hook)
    return state


def _backend() -> str:
    import torch.distributed as dist

    return str(dist.get_backend()) if dist.is_initialized() else ""


def _in_bucket_order(hook: Callable) -> Callable:
    """``hook`` run to completion before DDP's next bucket starts its own.

    torch's PowerSGD hook chains two all-reduces per bucket through future callbacks. Under Gloo those
    callbacks run on whichever thread finishes first, so with more than one bucket the ranks can issue
    the second all-reduce of different buckets in different orders -- a collective mismatch that aborts
    Gloo (``op.preamble.length <= op.nbytes``). Waiting for each bucket keeps every rank in DDP's bucket
    order, at the price of overlapping less of the communication with backward.
    """
    import torch

    def ordered(state, bucket):   # no annotations: DDP checks them against dist.GradBucket
        done = torch.futures.Future()
        done.set_result(hook(state, bucket).wait())
        return done

    return ordered


def grad_compress_report(name: str, state: Optional[Any], bits: int, rank: int) -> Dict[str, Any]:
    """What a run record says about its gradient compression (bytes this rank sent, for quantisers)."""
    out: Dict[str, Any] = {"grad_compress": name}
    if name in ("tinyscript", "uniform"):
        out["grad_bits"] = bits
        out["grad_bytes_sent"] = int(getattr(state, "bytes_sent", 0))
    elif name == "sketchml":
        out["grad_bytes_sent"] = int(getattr(state, "bytes_sent", 0))
        out["grad_bytes_fp32"] = int(getattr(state, "bytes_fp32", 0))
    elif name == "powersgd":
        out["powersgd_rank"] = rank
    return out
