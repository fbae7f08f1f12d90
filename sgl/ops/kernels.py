r"""A parallel CSR x dense kernel (numba) with the graph normalisation folded into it.

One hop computes, for every destination row :math:`i` and feature column :math:`c`,

.. math::  Y_{ic} = \sum_{e = p_i}^{p_{i+1}-1} w_e X_{j_e c} \;+\; \ell_i X_{ic}

where ``(p, j, w)`` is the graph's own CSR with the per-edge normalised values
:math:`w_e = \hat d_i^{\,r-1}\,\hat d_{j_e}^{-r}\,a_e` and :math:`\ell_i` the self-loop's value,
so the ``A + I`` matrix is never built (no ``E + n`` index copy). The sum runs in edge order
with fused multiply-adds, the order ATen's CSR kernel uses, so float32 results match
``torch.sparse.mm(adj, x, reduce="sum")`` to rounding (bit-identical in practice).

* **Threads**: rows are split into blocks of equal work (edges + rows) run with ``prange``
  on ``torch.get_num_threads()`` threads.
* **Gather**: the source row of the edge ``prefetch`` edges ahead in the block's edge
  stream (across row boundaries) is prefetched whole, every cache line of it (LLVM
  ``llvm.prefetch``), so the random row loads overlap. The default distance depends on the
  row's bytes: 16-bit rows are half as long, so twice as many of them fit the same number
  of lines in flight (measured under load on 1M nodes / 10M edges: 8-16 edges for 512-B
  rows, 32 for 256-B rows).
* **No temporaries**: the result goes straight into a preallocated ``out`` (optionally a
  column range ``columns=(c0, c1)`` of it, for column-blocked propagation).
* **Reduced precision**: ``x``/``out`` may be ``bfloat16`` or ``float16`` (stored bits
  converted in registers, float32 accumulation), halving the gathered bytes.

Host-only: the kernel reads CPU memory through numpy views; :func:`sgl.ops.propagate_hops`
sends other devices to torch's CSR SpMM (:mod:`sgl.ops.propagate_device`). Compiled code is
cached on disk (``cache=True``: next to this file, or numba's per-user cache folder when the
install is read-only), so a new process loads it instead of compiling.

Example:
    >>> import torch
    >>> from sgl.data import Graph
    >>> from sgl.ops import NormalizedAdjacency
    >>> from sgl.ops.kernels import csr_spmm, fused_adjacency
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    >>> csr_spmm(fused_adjacency(g, NormalizedAdjacency()), torch.eye(2))
    tensor([[0.5000, 0.5000],
            [0.5000, 0.5000]])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np
import torch

from sgl.errors import ConfigError, DeviceError, FeatureError, GraphError
from sgl.ops.allocation import empty_rows

__all__ = ["FusedAdjacency", "fused_adjacency", "csr_spmm", "kernel_supports", "KERNEL_DTYPES",
           "DEFAULT_PREFETCH", "default_prefetch", "empty_rows"]

#: Storage dtypes the kernel reads and writes (accumulation is float32, float64 for float64).
KERNEL_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
#: Edges ahead whose source row is prefetched, for rows of more than 256 bytes
#: (0 disables prefetching); see :func:`default_prefetch`.
DEFAULT_PREFETCH = 12
#: Edges ahead for rows of at most 256 bytes (bfloat16/float16 rows of 128 features).
SHORT_ROW_PREFETCH = 32
_LINE_BYTES = 64
_BLOCKS_PER_THREAD = 16


def kernel_supports(op: Any) -> bool:
    """Whether ``op`` is a plain operator the fused kernel computes (``adj`` and ``lazy``)."""
    from sgl.ops.graph_ops import LazyAdjacency, NormalizedAdjacency

    return type(op) in (NormalizedAdjacency, LazyAdjacency)


@dataclass(frozen=True)
class FusedAdjacency:
    """The graph's CSR with normalised per-edge ``values`` and per-row self-loop values ``loop``.

    ``loop`` is empty when the operator adds no diagonal. Arrays are numpy views (no copies
    of the graph's ``indptr``/``indices``).
    """

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    loop: np.ndarray
    num_nodes: int

    @property
    def num_edges(self) -> int:
        return int(self.indices.size)


def fused_adjacency(graph: Any, op: Any, dtype: torch.dtype = torch.float32) -> FusedAdjacency:
    r"""Per-edge values of ``op``'s matrix on the graph's own CSR, with the diagonal kept apart.

    The values are computed with the same float operations as
    :func:`sgl.ops.normalized_adjacency` (``d_src^{-r} * d_dst^{r-1} * w``). For
    :class:`~sgl.ops.LazyAdjacency` (``(1-α)Â + αI``) they are scaled by ``1-α`` and
    ``α`` is added to the diagonal.
    """
    from sgl.ops.graph_ops import LazyAdjacency

    if not kernel_supports(op):
        raise ConfigError(f"the fused kernel computes the 'adj' and 'lazy' operators, not {type(op).__name__}; "
                          f"use kernel='aten' for it")
    if dtype not in (torch.float32, torch.float64):
        raise ConfigError(f"adjacency values are float32 or float64, got {dtype}")
    if graph.indptr.device.type != "cpu":
        raise DeviceError(f"the fused kernel is host-only (numba) but the graph is on {graph.indptr.device}; "
                          f"use graph.cpu() or propagate_hops(..., device={str(graph.indptr.device)!r})")
    n = graph.num_nodes
    indptr, indices = graph.indptr, graph.indices
    counts = indptr[1:] - indptr[:-1]
    weights = None if graph.edge_weight is None else graph.edge_weight.to(dtype)
    if weights is None:
        deg = counts.to(dtype)
    else:
        deg = (torch.segment_reduce(weights, "sum", lengths=counts, unsafe=True) if n
               else torch.zeros(0, dtype=dtype, device="cpu"))
    if op.self_loops:
        deg = deg + 1
    nonzero = deg > 0
    left = torch.zeros(n, dtype=dtype, device="cpu")
    right = torch.zeros(n, dtype=dtype, device="cpu")
    left[nonzero] = deg[nonzero].pow(float(op.r) - 1.0)
    right[nonzero] = deg[nonzero].pow(-float(op.r))
    loop = (right * left) if op.self_loops else torch.zeros(0, dtype=dtype, device="cpu")
    scale = np.zeros(0, dtype=_np(left).dtype)
    if isinstance(op, LazyAdjacency):
        alpha = float(op.alpha)
        scale = np.array([1.0 - alpha], dtype=scale.dtype)
        loop = (loop * (1.0 - alpha) + alpha) if op.self_loops else torch.full((n,), alpha, dtype=dtype, device="cpu")
    np_indptr = _np(indptr).astype(np.int64, copy=False)
    np_indices = _np(indices)
    values = _edge_values(np_indptr, np_indices, _np(left), _np(right),
                          np.zeros(0, dtype=scale.dtype) if weights is None else _np(weights), scale)
    return FusedAdjacency(np_indptr, np_indices, values, _np(loop).copy(), int(n))


def _edge_values(indptr: np.ndarray, indices: np.ndarray, left: np.ndarray, right: np.ndarray,
                 weights: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Per-edge ``right[j] * left[i] (* w) (* scale)`` in one parallel pass (no gathered temporaries)."""
    from sgl.ops import _spmm_numba as nb

    out = np.empty(indices.size, dtype=left.dtype)
    if indices.size:
        bounds = _row_blocks(indptr, nb.set_threads(None) * _BLOCKS_PER_THREAD)
        nb.edge_values(bounds, indptr, indices, left, right, weights, scale, out)
    return out


def _np(t: Any) -> np.ndarray:
    """A numpy view of a CPU tensor (host-only: callers have checked the device)."""
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def _from_torch_csr(adj: torch.Tensor) -> FusedAdjacency:
    if adj.device.type != "cpu":
        raise DeviceError(f"the fused kernel is host-only (numba) but the matrix is on {adj.device}; use adj.cpu()")
    if adj.layout != torch.sparse_csr or adj.dim() != 2 or adj.size(0) != adj.size(1):
        raise GraphError(f"expected a square torch.sparse_csr matrix or a FusedAdjacency, got {adj.layout} "
                         f"of shape {tuple(adj.shape)}")
    values = adj.values()
    if values.dtype not in (torch.float32, torch.float64):
        raise FeatureError(f"the kernel takes float32 or float64 matrix values, got {values.dtype}")
    return FusedAdjacency(_np(adj.crow_indices()).astype(np.int64, copy=False), _np(adj.col_indices()),
                          _np(values), np.zeros(0, dtype=_np(values).dtype), int(adj.size(0)))


def _bits(t: torch.Tensor) -> np.ndarray:
    """A numpy view of ``t``'s storage: float16/bfloat16 as uint16 bits (numba has no half type)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.dtype == torch.float16:
        return t.view(torch.int16).numpy().view(np.int16)
    return t.numpy()


def default_prefetch(row_bytes: int) -> int:
    """Prefetch distance (edges ahead) for gathered rows of ``row_bytes`` bytes.

    Example:
        >>> default_prefetch(512), default_prefetch(256)
        (12, 32)
    """
    return SHORT_ROW_PREFETCH if row_bytes <= 256 else DEFAULT_PREFETCH


def _prefetch_lines(x: torch.Tensor, c0: int, c1: int) -> Tuple[int, int]:
    """``(lines, step)``: prefetches per gathered row segment ``x[j, c0:c1]`` and the element stride
    between them (one per 64-B cache line; one more when the segment may start mid-line)."""
    size = x.element_size()
    step = max(1, _LINE_BYTES // size)
    nbytes = (c1 - c0) * size
    lines = -(-nbytes // _LINE_BYTES)
    if (x.data_ptr() + c0 * size) % _LINE_BYTES or (x.size(1) * size) % _LINE_BYTES:
        lines += 1
    return lines, step


def _row_blocks(indptr: np.ndarray, blocks: int) -> np.ndarray:
    """Row boundaries splitting ``edges + rows`` (the per-row work) into ``blocks`` near-equal parts."""
    n = indptr.size - 1
    blocks = max(1, min(blocks, n))
    work = indptr + np.arange(n + 1, dtype=np.int64)
    bounds = np.searchsorted(work, np.linspace(0, work[-1], blocks + 1), side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n
    return np.unique(bounds)


def csr_spmm(adj: Any, x: torch.Tensor, out: Optional[torch.Tensor] = None, *,
             columns: Optional[Tuple[int, int]] = None, prefetch: Optional[int] = None,
             threads: Optional[int] = None) -> torch.Tensor:
    """``adj @ x`` (``x``: ``[n, d]``) into ``out`` (allocated with ``x``'s dtype when ``None``).

    Args:
        adj: a :class:`FusedAdjacency` (see :func:`fused_adjacency`) or a square
            ``torch.sparse_csr`` matrix with float values.
        x: dense ``[n, d]`` tensor, C-contiguous, float32/float64/bfloat16/float16.
        out: ``[n, d]`` C-contiguous destination, any kernel dtype (may differ from ``x``'s);
            only ``columns`` of it are written.
        columns: ``(c0, c1)``, the column range to compute (default: all).
        prefetch: edges ahead to prefetch the source row of (0: off; default
            :func:`default_prefetch` of the gathered row segment's bytes).
        threads: worker threads (default ``torch.get_num_threads()``).
    """
    from sgl.ops import _spmm_numba as nb

    if isinstance(adj, torch.Tensor):
        adj = _from_torch_csr(adj)
    if not isinstance(adj, FusedAdjacency):
        raise GraphError(f"expected a FusedAdjacency or a torch.sparse_csr matrix, got {type(adj).__name__}")
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise FeatureError(f"x must be a 2-D tensor [num_nodes, d], got {getattr(x, 'shape', type(x))}")
    if x.dtype not in KERNEL_DTYPES:
        raise FeatureError(f"the kernel reads {[str(d) for d in KERNEL_DTYPES]}, got x of dtype {x.dtype}; "
                           f"convert with x.float()")
    if x.size(0) != adj.num_nodes:
        raise FeatureError(f"x has {x.size(0)} rows but the graph has {adj.num_nodes} nodes")
    n, d = x.shape
    if out is None:
        out = empty_rows(n, d, x.dtype)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (n, d):
        raise FeatureError(f"out must be a [{n}, {d}] tensor, got {tuple(getattr(out, 'shape', ()))}")
    if out.dtype not in KERNEL_DTYPES:
        raise FeatureError(f"out dtype {out.dtype} is not one of {[str(t) for t in KERNEL_DTYPES]}")
    if x.device.type != "cpu" or out.device.type != "cpu":
        raise DeviceError(f"the fused kernel is host-only (numba): x is on {x.device}, out on {out.device}; "
                          f"use propagate_hops(..., device=...) for other devices")
    if not x.is_contiguous() or not out.is_contiguous():
        raise FeatureError("x and out must be C-contiguous CPU tensors (call .contiguous())")
    if n and d and out.data_ptr() == x.data_ptr():
        raise FeatureError("out must not alias x (a hop cannot be computed in place)")
    c0, c1 = (0, d) if columns is None else (int(columns[0]), int(columns[1]))
    if not 0 <= c0 <= c1 <= d:
        raise ConfigError(f"columns must satisfy 0 <= c0 <= c1 <= {d}, got {columns}")
    if prefetch is None:
        prefetch = default_prefetch((c1 - c0) * x.element_size())
    if isinstance(prefetch, bool) or not isinstance(prefetch, (int, np.integer)) or prefetch < 0:
        raise ConfigError(f"prefetch must be a non-negative integer or None, got {prefetch!r}")
    acc = np.float64 if torch.float64 in (x.dtype, out.dtype) else np.float32
    values = adj.values.astype(acc, copy=False)
    loop = adj.loop.astype(acc, copy=False)
    if n == 0 or c1 == c0:
        return out
    workers = nb.set_threads(threads)
    bounds = _row_blocks(adj.indptr, workers * _BLOCKS_PER_THREAD)
    lines, step = _prefetch_lines(x, c0, c1)
    nb.spmm(bounds, adj.indptr, adj.indices, values, loop, _bits(x), _bits(out), c0, c1, int(prefetch), lines, step)
    return out
