r"""Numba kernels of heterogeneous GAMLP's packed path: subset convolution, per-hop PReLU, row gather.

**Subset convolution** (:func:`subset_mix`), one fused pass each way.

Forward: :math:`Z_{h b d} = \sum_s X_{b h s d}\, W_{h s d}` for ``X`` ``[B, H, S, d]`` and
``W`` ``[H, S, d]``, written hop-major ``[H, B, d]`` (the layout the batched per-hop MLPs read).
Backward (``W`` only; the hop features are inputs, not parameters):
:math:`\partial W_{h s d} = \sum_b G_{h b d}\, X_{b h s d}`, accumulated per thread over row
chunks, then summed. Each pass reads ``X`` once; torch's broadcast ``(X * W).sum(2)`` writes and
re-reads a ``[B, H, S, d]`` temporary both ways. Where ``X`` needs a gradient, or for dtypes
other than float32/float64, :func:`subset_mix` uses that torch expression.

**Per-hop PReLU** (:func:`hop_prelu`): :math:`y_{hbf} = x_{hbf}` if :math:`x_{hbf} \ge 0` else
:math:`a_h x_{hbf}`, with the slope gradient :math:`\partial a_h = \sum_{x_{hbf}<0} G_{hbf} x_{hbf}`;
one pass each way instead of torch's compare, multiply and ``where``.

**Row gather** (:func:`gather_rows`): ``index_select`` of a mini-batch's rows on all threads.

Example:
    >>> import torch
    >>> x, w = torch.randn(5, 2, 3, 4), torch.randn(2, 3, 4, requires_grad=True)
    >>> torch.allclose(subset_mix(x, w), (x * w).sum(2).transpose(0, 1), atol=1e-6)
    True
"""
from __future__ import annotations

import numba
import numpy as np
import torch
from numba import njit, prange

__all__ = ["subset_mix", "hop_prelu", "gather_rows"]


@njit(parallel=True, cache=True, nogil=True)
def _forward(x, w, z):  # pragma: no cover - compiled
    rows, hops, subsets, width = x.shape
    for b in prange(rows):
        for h in range(hops):
            for d in range(width):
                z[h, b, d] = x[b, h, 0, d] * w[h, 0, d]
            for s in range(1, subsets):
                for d in range(width):
                    z[h, b, d] += x[b, h, s, d] * w[h, s, d]


@njit(parallel=True, cache=True, nogil=True)
def _backward(x, g, parts):  # pragma: no cover - compiled
    rows, hops, subsets, width = x.shape
    chunks = parts.shape[0]
    per = (rows + chunks - 1) // chunks
    for c in prange(chunks):
        acc = parts[c]
        for b in range(c * per, min(rows, (c + 1) * per)):
            for h in range(hops):
                for s in range(subsets):
                    for d in range(width):
                        acc[h, s, d] += g[h, b, d] * x[b, h, s, d]


class _SubsetMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        xc, wc = x.detach().contiguous(), w.detach().contiguous()
        z = torch.empty(x.size(1), x.size(0), x.size(3), dtype=x.dtype)
        _forward(xc.numpy(), wc.numpy(), z.numpy())
        ctx.save_for_backward(xc)
        return z

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        (x,) = ctx.saved_tensors
        chunks = max(1, min(numba.get_num_threads(), x.size(0)))
        parts = np.zeros((chunks, x.size(1), x.size(2), x.size(3)), dtype=x.numpy().dtype)
        _backward(x.numpy(), grad.contiguous().numpy(), parts)
        return None, torch.from_numpy(parts.sum(axis=0))


def subset_mix(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``(x * w).sum(2).transpose(0, 1)`` (``[H, B, d]``, contiguous), fused; see the module docstring."""
    fused = (x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and w.dtype == x.dtype
             and not x.requires_grad and x.dim() == 4 and x.numel() > 0)
    if not fused:
        return (x * w).sum(dim=2).transpose(0, 1)
    return _SubsetMix.apply(x, w)


@njit(parallel=True, cache=True, nogil=True)
def _prelu_forward(x, slopes, y):  # pragma: no cover - compiled
    hops, rows, width = x.shape
    for t in prange(hops * rows):
        h, b = t // rows, t % rows
        a = slopes[h]
        for f in range(width):
            v = x[h, b, f]
            y[h, b, f] = v if v >= 0 else a * v


@njit(parallel=True, cache=True, nogil=True)
def _prelu_backward(x, slopes, g, gx, parts):  # pragma: no cover - compiled
    hops, rows, width = x.shape
    chunks = parts.shape[1]
    per = (rows + chunks - 1) // chunks
    for t in prange(hops * chunks):
        h, c = t // chunks, t % chunks
        a = slopes[h]
        acc = 0.0
        for b in range(c * per, min(rows, (c + 1) * per)):
            for f in range(width):
                v = x[h, b, f]
                if v >= 0:
                    gx[h, b, f] = g[h, b, f]
                else:
                    gx[h, b, f] = a * g[h, b, f]
                    acc += g[h, b, f] * v
        parts[h, c] = acc


class _HopPReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, slopes: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        xc, sc = x.detach().contiguous(), slopes.detach().contiguous()
        y = torch.empty_like(xc)
        _prelu_forward(xc.numpy(), sc.numpy(), y.numpy())
        ctx.save_for_backward(xc, sc)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        x, slopes = ctx.saved_tensors
        gx = torch.empty_like(x)
        chunks = max(1, min(numba.get_num_threads(), x.size(1)))
        parts = np.zeros((x.size(0), chunks), dtype=np.float64)
        _prelu_backward(x.numpy(), slopes.numpy(), grad.contiguous().numpy(), gx.numpy(), parts)
        return gx, torch.from_numpy(parts.sum(axis=1)).to(slopes.dtype)


def hop_prelu(x: torch.Tensor, slopes: torch.Tensor) -> torch.Tensor:
    """PReLU of ``x`` ``[H, B, F]`` with slope ``slopes[h]`` for hop ``h`` (fused; see the module docstring)."""
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64) or slopes.dtype != x.dtype \
            or x.dim() != 3 or x.numel() == 0:
        return torch.where(x >= 0, x, x * slopes.view(-1, 1, 1))
    return _HopPReLU.apply(x, slopes)


@njit(parallel=True, cache=True, nogil=True)
def _gather(src, index, out):  # pragma: no cover - compiled
    for i in prange(index.size):
        out[i, :] = src[index[i], :]


def gather_rows(src: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``src.index_select(0, index)`` for a 2-D CPU float tensor, rows copied on all threads."""
    if (src.device.type != "cpu" or src.dim() != 2 or not src.is_contiguous() or index.numel() < 1024
            or src.dtype not in (torch.float32, torch.float64) or src.requires_grad):
        return src.index_select(0, index)
    index = index.to(torch.int64)
    if int(index.min()) < 0 or int(index.max()) >= src.size(0):
        return src.index_select(0, index)  # torch raises its own IndexError
    out = torch.empty(index.numel(), src.size(1), dtype=src.dtype)
    _gather(src.numpy(), index.contiguous().numpy(), out.numpy())
    return out
