"""MEMO's token-wise activation offload/recompute for Transformer blocks.

The block is our :class:`~sgl.systems.runtime.TransformerBlock` or a Hugging Face Llama-style
decoder layer (:mod:`sgl.systems.memory.block_parts` splits both).  A pre-norm block is an *attention* sub-layer ``a = Attn(LN1(x))`` followed by a *token-wise*
part ``y = h + MLP(LN2(h))``, ``h = x + O(a)``, in which every token is independent.  After the
forward of a block wrapped by :class:`TokenOffloadBlock`:

* the attention sub-layer's saved tensors (the layer input, q/k/v, the attention output and its
  statistics) are always copied to host memory -- MEMO's tensor-level choice, since recomputing
  attention dominates at long sequences. On a GPU the copies go to pinned buffers on a side CUDA
  stream (offload after the compute stream's queued work, reload before the compute stream goes on),
  so they overlap compute; on the CPU the same code path copies directly;
* of the ``n = b*s`` tokens of the token-wise part, the first ``round(alpha*n)`` keep their saved
  activations in host memory; the other tokens keep nothing but their inputs' host copies and are
  recomputed in backward (MEMO's token-level choice).

Nothing the block saves for backward stays on the device.  In backward the host copies come back
and the recomputed tokens run their forward again.  The result equals the plain block: the forward
bit-for-bit, gradients up to float summation order (parameter gradients add the two token groups'
contributions separately; tested at 1e-6 relative in float32, 1e-12 in float64).

>>> import torch
>>> from sgl.systems.parallel import get_model_config
>>> from sgl.systems.runtime import TransformerBlock
>>> torch.manual_seed(0); block = TransformerBlock(get_model_config("tiny"))  # doctest: +ELLIPSIS
<...>
>>> x = torch.randn(2, 8, 64, requires_grad=True)
>>> y = TokenOffloadBlock(block, alpha=0.5)(x)
>>> bool(torch.equal(y, block(x)))
True
"""
from __future__ import annotations

from typing import Any, List, Tuple

import torch
import torch.nn as nn
from torch.utils._python_dispatch import _disable_current_modes

from sgl._checks import check_real
from sgl.systems.memory.block_parts import attention_part, blocks_of, layer_context, layer_kind, tokenwise_part

__all__ = ["TokenOffloadBlock", "HostStore", "attention_part", "tokenwise_part", "wrap_blocks"]


class HostStore:
    """Copies tensors to host memory and back; counts the bytes it holds (current and peak).

    The copies are made with any tracing dispatch mode disabled, so a
    :class:`~sgl.systems.memory.TensorLifetimeTracer` counts only device memory on a CPU run.
    With a ``quantizer`` (e.g. :class:`sgl.comm.compress.TinyScriptQuantizer`: ``encode(t)`` to a
    ``uint8`` payload, ``decode(payload, numel)``), floating tensors of at least ``min_numel`` values
    are kept as their ``bits``-bit payloads instead (TinyScript's activation compression): fewer host
    bytes, gradients up to the quantisation error.
    """

    def __init__(self, params: List[torch.Tensor], quantizer: Any = None, min_numel: int = 1024) -> None:
        self.param_ptrs = {p.untyped_storage().data_ptr() for p in params}
        self.quantizer = quantizer
        self.min_numel = int(min_numel)
        self.current = 0
        self.peak = 0

    def put(self, t: torch.Tensor) -> Any:
        if t.untyped_storage().data_ptr() in self.param_ptrs:
            return ("param", t)
        if self.quantizer is not None and t.is_floating_point() and t.numel() >= self.min_numel:
            with _disable_current_modes():
                payload = self.quantizer.encode(t.detach()).to("cpu", non_blocking=t.device.type == "cuda")
            nbytes = payload.numel() * payload.element_size()
            self.current += nbytes
            self.peak = max(self.peak, self.current)
            return ("quant", payload, t.shape, t.dtype, t.device, nbytes)
        with _disable_current_modes():
            side = self._side_stream(t.device)
            if side is not None:
                # device -> pinned host on the side stream, after what the compute stream has queued;
                # record_stream keeps the allocator from reusing t before the copy is done
                side.wait_stream(torch.cuda.current_stream(t.device))
                with torch.cuda.stream(side):
                    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                    host.copy_(t, non_blocking=True)
                t.record_stream(side)
            else:
                host = t.detach().clone()
        nbytes = host.numel() * host.element_size()
        self.current += nbytes
        self.peak = max(self.peak, self.current)
        return ("host", host, t.device, nbytes, t.requires_grad)

    def _side_stream(self, device: torch.device) -> Any:
        """The copy stream of ``device`` (one per store and device); ``None`` off CUDA (same code path)."""
        if device.type != "cuda":
            return None
        streams = self.__dict__.setdefault("_streams", {})
        if device not in streams:
            streams[device] = torch.cuda.Stream(device)
        return streams[device]

    def get(self, packed: Any) -> torch.Tensor:
        if packed[0] == "param":
            return packed[1]
        if packed[0] == "quant":
            _, payload, shape, dtype, device, nbytes = packed
            self.current -= nbytes
            values = self.quantizer.decode(payload.to(device), int(torch.Size(shape).numel()))
            return values.reshape(shape).to(dtype)
        _, host, device, nbytes, _ = packed
        self.current -= nbytes
        side = self._side_stream(device)
        if side is None:
            return host.to(device) if device.type != "cpu" else host.clone()
        # host -> device on the side stream (after the offload copy, queued on it earlier); the
        # compute stream waits for it, and the tensor is marked as used there
        with torch.cuda.stream(side):
            back = host.to(device, non_blocking=True)
        compute = torch.cuda.current_stream(device)
        compute.wait_stream(side)
        back.record_stream(compute)
        return back

    def hooks(self) -> Any:
        return torch.autograd.graph.saved_tensors_hooks(self.put, self.get)


class _RecomputeTokens(torch.autograd.Function):
    """Token-wise part of the recomputed tokens: inputs to host, forward again in backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, a: torch.Tensor, block: nn.Module, store: HostStore,
                *params: torch.Tensor) -> torch.Tensor:
        ctx.block, ctx.store = block, store
        ctx.packed = (store.put(x), store.put(a))
        with torch.no_grad():
            return tokenwise_part(block, x, a)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Any, ...]:
        x, a = (ctx.store.get(p).detach().requires_grad_(True) for p in ctx.packed)
        params = [p for p in ctx.block.parameters() if p.requires_grad]
        with torch.enable_grad():
            out = tokenwise_part(ctx.block, x, a)
        grads = torch.autograd.grad(out, [x, a] + params, grad, allow_unused=True)
        return (grads[0], grads[1], None, None) + tuple(grads[2:])


class TokenOffloadBlock(nn.Module):
    """A Transformer block whose saved activations live in host memory or are recomputed.

    Per block, host bytes are ``S_fixed + alpha * S_others`` (attention sub-layer and inputs, plus
    the token-wise part's saved activations of ``alpha`` of the tokens); device bytes saved for
    backward are zero.  ``alpha = 0`` recomputes the whole token-wise part, ``alpha = 1`` offloads
    all of it.

    Args:
        block: a :class:`~sgl.systems.runtime.TransformerBlock` or a Hugging Face decoder layer
            (its weights are used, not copied); a Hugging Face layer is called as its model calls it.
        alpha: fraction of tokens whose token-wise activations are offloaded, in ``[0, 1]``.
        quantizer: keep the offloaded activations as ``bits``-bit codes (see :class:`HostStore`;
            e.g. ``sgl.comm.compress.TinyScriptQuantizer(4)``); ``None`` keeps them exact.
    """

    def __init__(self, block: nn.Module, alpha: float = 0.5, quantizer: Any = None) -> None:
        super().__init__()
        self.kind = layer_kind(block, "TokenOffloadBlock")
        self.block = block
        self.alpha = check_real(alpha, "offload ratio alpha", 0.0, 1.0)
        self.store = HostStore(list(block.parameters()), quantizer=quantizer)

    def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        ctx = layer_context(args, kwargs) if self.kind == "hf" else None
        if not torch.is_grad_enabled() or (ctx and ctx.get("use_cache")) or (self.kind == "tiny" and (args or kwargs)):
            return self.block(x, *args, **kwargs)
        with self.store.hooks():
            a = attention_part(self.block, x, ctx)
        b, s, h = x.shape
        n = b * s
        k = int(round(self.alpha * n))
        xf, af = x.reshape(n, h), a.reshape(n, -1)
        parts = []
        if k:
            with self.store.hooks():
                parts.append(tokenwise_part(self.block, xf[:k], af[:k]))
        if k < n:
            params = [p for p in self.block.parameters() if p.requires_grad]
            parts.append(_RecomputeTokens.apply(xf[k:], af[k:], self.block, self.store, *params))
        out = parts[0] if len(parts) == 1 else torch.cat(parts)
        return out.view(b, s, h)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


def wrap_blocks(model: nn.Module, alpha: float, last_plain: int = 0) -> nn.Module:
    """Wrap the decoder layers of ``model`` in place with :class:`TokenOffloadBlock` (the last
    ``last_plain`` not: MEMO leaves the final layers on the device, their backward comes at once).

    ``model``: a TinyLM (``model.blocks``) or a Hugging Face causal LM (``model.model.layers``).
    """
    blocks = blocks_of(model)
    for i in range(len(blocks) - last_plain):
        if not isinstance(blocks[i], TokenOffloadBlock):
            blocks[i] = TokenOffloadBlock(blocks[i], alpha)
    return model
