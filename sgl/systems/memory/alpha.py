"""MEMO's offload ratio: the largest token fraction whose swap hides behind compute and fits host memory.

With per-layer swap bytes ``S_fixed`` (always offloaded: layer input and attention tensors) and
``S_others`` (the token-wise activations of all tokens), link bandwidth ``B`` (bytes/s), one
layer's compute time ``T_layer`` and host capacity ``M_host`` for ``n`` layers (the last two need
no swap)::

    alpha* = max alpha in [0, 1]  s.t.  (S_fixed + alpha S_others) / B <= T_layer,
                                        (n - 2) (S_fixed + alpha S_others) <= M_host

a one-variable LP, solved in closed form.  If even ``alpha = 0`` overflows host memory the plan
is infeasible (:class:`~sgl.errors.PlanError` names the minimum); if ``alpha = 0`` cannot hide
behind compute, ``alpha* = 0`` and ``swap_bound`` is set.

>>> r = offload_ratio(s_fixed=100, s_others=400, bandwidth=1000, layer_time=0.3, host_bytes=10_000, num_layers=10)
>>> r.alpha, r.limit
(0.5, 'bandwidth')
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict

import torch
import torch.nn as nn

from sgl._checks import check_int, check_real
from sgl.errors import PlanError

__all__ = ["AlphaPlan", "offload_ratio", "measure_offload_inputs"]


@dataclass
class AlphaPlan:
    """The chosen ``alpha``, which constraint bound it, and the inputs it came from."""

    alpha: float
    limit: str
    swap_bound: bool
    inputs: Dict[str, float]


def offload_ratio(s_fixed: float, s_others: float, bandwidth: float, layer_time: float, host_bytes: float,
                  num_layers: int) -> AlphaPlan:
    """Closed-form ``alpha*`` (see the module docstring)."""
    s_fixed = check_real(s_fixed, "s_fixed (bytes)", 0.0)
    s_others = check_real(s_others, "s_others (bytes)", 0.0)
    bandwidth = check_real(bandwidth, "bandwidth (bytes/s)", 0.0, open_low=True)
    layer_time = check_real(layer_time, "layer_time (s)", 0.0)
    host_bytes = check_real(host_bytes, "host memory cap (bytes)", 0.0)
    num_layers = check_int(num_layers, "num_layers", 1)
    swapped = max(num_layers - 2, 0)
    inputs = dict(s_fixed=s_fixed, s_others=s_others, bandwidth=bandwidth, layer_time=layer_time,
                  host_bytes=host_bytes, num_layers=num_layers)
    if swapped and swapped * s_fixed > host_bytes:
        raise PlanError(f"host memory cap {host_bytes:.0f} B is below the minimum working set of the offload: "
                        f"{swapped} layers x {s_fixed:.0f} B of always-offloaded tensors = {swapped * s_fixed:.0f} B; "
                        "raise the host budget or offload fewer layers")
    bounds = {"all tokens": 1.0}
    if s_others > 0:
        bounds["bandwidth"] = (bandwidth * layer_time - s_fixed) / s_others
        if swapped:
            bounds["host memory"] = (host_bytes / swapped - s_fixed) / s_others
    limit = min(bounds, key=bounds.get)
    alpha = min(1.0, max(0.0, bounds[limit]))
    return AlphaPlan(alpha, limit, bounds.get("bandwidth", 1.0) < 0, inputs)


def _seconds(fn: Any, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _first(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


def measure_offload_inputs(block: nn.Module, x: torch.Tensor, repeat: int = 3,
                           layer_kwargs: Dict[str, Any] | None = None) -> Dict[str, float]:
    """Measured ``S_fixed``, ``S_others``, ``B`` and ``T_layer`` for ``block`` on input ``x``.

    ``layer_kwargs``: what the block's model passes it besides ``x`` -- for a Hugging Face decoder
    layer :meth:`Decoder.layer_kwargs <sgl.systems.runtime.models.Decoder.layer_kwargs>` (the rotary
    ``position_embeddings``); ``None`` for a TinyLM block.

    Swap bytes are read from :class:`~sgl.systems.memory.TokenOffloadBlock`'s host store at
    ``alpha = 0`` and ``1``; ``B`` is the device-to-host copy rate (pinned on a GPU, a memcpy on
    CPU) of a tensor of ``S_others`` bytes; ``T_layer`` is the block's forward + backward time.
    """
    from sgl.systems.memory.offload import TokenOffloadBlock

    kwargs = dict(layer_kwargs or {})
    host = {}
    for alpha in (0.0, 1.0):
        wrapped = TokenOffloadBlock(block, alpha)
        xi = x.detach().requires_grad_(True)
        wrapped(xi, **kwargs).sum()
        host[alpha] = wrapped.store.peak
    s_fixed, s_others = float(host[0.0]), float(host[1.0] - host[0.0])
    nbytes = max(int(s_others), 32 << 20)  # large enough to leave the caches: a memory-bandwidth figure
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=x.device)
    dst = torch.empty(src.shape, dtype=src.dtype, pin_memory=x.device.type == "cuda")

    def copy() -> None:
        dst.copy_(src, non_blocking=True)
        if x.device.type == "cuda":
            torch.cuda.synchronize()

    bandwidth = nbytes / _seconds(copy, repeat)

    def layer() -> None:
        xi = x.detach().requires_grad_(True)
        _first(block(xi, **kwargs)).sum().backward()
        if x.device.type == "cuda":
            torch.cuda.synchronize()

    layer_time = _seconds(layer, repeat)
    block.zero_grad(set_to_none=True)
    return dict(s_fixed=s_fixed, s_others=s_others, bandwidth=bandwidth, layer_time=layer_time)
