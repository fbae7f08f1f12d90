r"""Propagation on any torch device: resident there, or streamed through it in row blocks.

:func:`sgl.ops.propagate_hops` computes on ``device`` (default: the device of ``x``) in one
of two modes, chosen by :func:`plan_device`:

* **resident**: the operator's CSR matrix, ``x`` and the hops live on the device and a hop
  is one ``torch.sparse.mm`` (cuSPARSE's SpMM on CUDA, ATen's CSR kernel on the CPU, where
  the fused numba kernel of :mod:`sgl.ops.kernels` is the faster default). Chosen when
  :func:`resident_bytes` fits the budget ``max_device_bytes`` (default: 80 % of the free
  memory of a CUDA device; no bound elsewhere) and no ``chunk_rows`` is given.
* **streamed** (host-chunked): the matrix stays in host memory as a
  :class:`StreamedAdjacency`; each product sends blocks of destination rows through the
  device. A block's CSR slice goes up (kept there when the whole matrix fits the budget),
  then either the whole previous hop (uploaded once per hop, when it fits) or only the
  block's distinct source rows (gathered on the host into page-locked memory), and the
  block's result comes back into a page-locked host hop (or, with ``out_dir``, is written to
  disk one column chunk at a time). Rows of a block sum their edges in the same order as the
  one-shot product, so the two agree to rounding.

Example (the CPU runs the same streamed code a GPU would):
    >>> import torch
    >>> from sgl.data import Graph
    >>> from sgl.ops import propagate_hops
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]))
    >>> x = torch.eye(3)
    >>> streamed = propagate_hops(g, x, k=2, device="cpu", chunk_rows=1)
    >>> all(torch.allclose(a, b) for a, b in zip(streamed, propagate_hops(g, x, k=2)))
    True
"""
from __future__ import annotations

import copy
import warnings
from typing import Any, Dict, Optional, Tuple

import torch

from sgl.data.placement import resolve_device
from sgl.errors import ConfigError, DeviceError, FeatureError
from sgl.ops.graph_ops import GraphOperator, spmm

__all__ = ["StreamedAdjacency", "streamed_adjacency", "compute_device", "device_budget", "resident_bytes",
           "plan_device", "graph_structure_on", "DEVICE_MEMORY_SHARE"]

#: Share of a CUDA device's free memory a propagation plans to use by default.
DEVICE_MEMORY_SHARE = 0.8
_INDEX_BYTES = 8


def compute_device(device: Any, x: torch.Tensor) -> torch.device:
    """The device to compute on: ``device`` validated (``"cpu"``, ``"cuda"``, ``"cuda:N"``, a
    :class:`torch.device` or a GPU index), else the device of ``x``.

    Raises:
        DeviceError: the device is malformed or unavailable (``cuda:7`` on a machine without
            it), or is ``meta`` (meta tensors hold no values to propagate).
    """
    target = x.device if device is None else resolve_device(device)
    if target.type == "meta":
        raise DeviceError("propagate_hops computes values, which meta tensors do not hold; "
                          "pass device='cpu' or a CUDA device")
    if target.type not in ("cpu", "cuda"):  # other backends (mps, xpu...): usable only where torch has them
        try:
            torch.empty(0, device=target)
        except (RuntimeError, AssertionError, NotImplementedError) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DeviceError(f"device {str(target)!r} is not usable here ({reason}); pass device='cpu' or a CUDA "
                              f"device") from None
    return target


def device_budget(device: torch.device, max_device_bytes: Optional[int] = None) -> Optional[int]:
    """Bytes of ``device`` a propagation may plan for: ``max_device_bytes`` when given, else
    :data:`DEVICE_MEMORY_SHARE` of a CUDA device's free memory (counting what torch's caching
    allocator holds unused), else ``None`` (no bound: host memory is the caller's to size)."""
    if max_device_bytes is not None:
        return int(max_device_bytes)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(DEVICE_MEMORY_SHARE * free)
    return None


def _nnz(graph: Any, op: GraphOperator) -> int:
    return int(graph.num_edges) + (int(graph.num_nodes) if getattr(op, "self_loops", False) else 0)


def resident_bytes(graph: Any, x: torch.Tensor, k: int, op: GraphOperator, device: torch.device, width: int,
                   on_disk: bool) -> int:
    """Device bytes of the resident mode: the CSR matrix and the temporaries of building it,
    ``x`` when it is not on ``device`` yet, the ``k`` hops (in memory only) and the operator's
    ``[num_nodes, width]`` workspace."""
    n, d = x.shape
    size = x.element_size()
    nnz = _nnz(graph, op)
    matrix = (n + 1) * _INDEX_BYTES + nnz * (_INDEX_BYTES + size)
    build = 2 * nnz * _INDEX_BYTES  # row ids and positions while the loops are appended
    features = 0 if x.device == device else n * d * size
    hops = 0 if on_disk else k * n * d * size
    work = n * width * size * (1 + op.workspace_factor())
    return matrix + build + features + hops + work


def plan_device(graph: Any, x: torch.Tensor, k: int, op: GraphOperator, device: torch.device, width: int,
                on_disk: bool, chunk_rows: Optional[int], max_device_bytes: Optional[int]) -> str:
    """``"resident"`` or ``"streamed"`` (see the module docstring)."""
    if chunk_rows is not None:
        return "streamed"
    budget = device_budget(device, max_device_bytes)
    if budget is None or resident_bytes(graph, x, k, op, device, width, on_disk) <= budget:
        return "resident"
    return "streamed"


def graph_structure_on(graph: Any, device: torch.device) -> Any:
    """``graph`` with its structure (``indptr``, ``indices``, ``edge_weight``) on ``device``;
    node data is not moved (the operators read only the structure). ``graph`` itself when it
    is already there."""
    weight = graph.edge_weight
    if graph.indptr.device == device and graph.indices.device == device and (weight is None or weight.device == device):
        return graph
    moved = copy.copy(graph)  # no re-validation: the values do not change
    moved.indptr = graph.indptr.to(device)
    moved.indices = graph.indices.to(device)
    moved.edge_weight = None if weight is None else weight.to(device)
    return moved


def _csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, shape: Tuple[int, int]) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "CSR support is in beta"
        return torch.sparse_csr_tensor(crow, col, values, shape)


class StreamedAdjacency:
    r"""A host CSR matrix whose products with dense ``[n, c]`` matrices run on ``device`` in
    blocks of destination rows (``A @ x`` returns a host tensor, page-locked on CUDA).

    Args:
        adj (Tensor): square ``torch.sparse_csr`` matrix in host memory.
        device (torch.device): where the blocks are multiplied.
        width (int): columns of the matrices it will multiply (to size the blocks).
        itemsize (int): bytes per feature value.
        chunk_rows (int, optional): destination rows per block (default: as many as fit
            half the budget).
        max_device_bytes (int, optional): device bytes to plan for (default
            :func:`device_budget`).

    The previous hop goes up whole, once per product, when it fits the budget beside a
    block; otherwise each block gathers only its distinct source rows (their ids and the
    block's renumbered columns are computed once and reused by every hop).
    """

    def __init__(self, adj: torch.Tensor, device: torch.device, *, width: int, itemsize: int,
                 chunk_rows: Optional[int] = None, max_device_bytes: Optional[int] = None) -> None:
        if adj.layout != torch.sparse_csr or adj.device.type != "cpu" or adj.size(0) != adj.size(1):
            raise ConfigError(f"StreamedAdjacency takes a square host torch.sparse_csr matrix, got {adj.layout} "
                              f"{tuple(adj.shape)} on {adj.device}")
        self.device = device
        self.num_nodes = int(adj.size(0))
        self.crow, self.col, self.values = adj.crow_indices(), adj.col_indices(), adj.values()
        n, nnz = self.num_nodes, int(self.col.numel())
        budget = device_budget(device, max_device_bytes)
        row_nnz = nnz / max(1, n)
        csr_row = _INDEX_BYTES + row_nnz * (_INDEX_BYTES + self.values.element_size())
        whole_source = n * width * itemsize
        if chunk_rows is None:
            if budget is None:
                rows = n
            else:
                # half the budget left beside the source for a block: its CSR slice, its result
                # and, when gathering, up to one source row per edge; the rest is SpMM workspace
                spare = budget - whole_source
                whole_row = csr_row + width * itemsize
                gather_row = whole_row + row_nnz * width * itemsize
                rows = int(spare // (2 * whole_row)) if spare > 0 else 0
                if rows < min(n, 1024):
                    rows = int(budget // (2 * gather_row))
            rows = max(1, min(n, rows))
        else:
            rows = max(1, min(n, int(chunk_rows)))
        self.chunk_rows = rows
        self.bounds = list(range(0, n, rows)) + [n]
        block_bytes = rows * (csr_row + width * itemsize)
        #: whether each product uploads the whole previous hop (else the rows each block needs)
        self.whole_source = budget is None or whole_source + block_bytes <= budget
        matrix_bytes = (n + 1) * _INDEX_BYTES + nnz * (_INDEX_BYTES + self.values.element_size())
        self._keep_blocks = budget is None or matrix_bytes + whole_source + block_bytes <= budget
        self._pin = device.type == "cuda"
        self._blocks: Dict[int, torch.Tensor] = {}
        self._sources: Dict[int, torch.Tensor] = {}
        self._local: Dict[int, torch.Tensor] = {}

    @property
    def shape(self) -> Tuple[int, int]:
        return self.num_nodes, self.num_nodes

    def __repr__(self) -> str:
        return (f"StreamedAdjacency(num_nodes={self.num_nodes}, device={self.device}, chunk_rows={self.chunk_rows}, "
                f"whole_source={self.whole_source})")

    def _block(self, b: int) -> torch.Tensor:
        """Block ``b``'s CSR slice on the device (columns renumbered to its sources when gathering)."""
        if b in self._blocks:
            return self._blocks[b]
        r0, r1 = self.bounds[b], self.bounds[b + 1]
        e0, e1 = int(self.crow[r0]), int(self.crow[r1])
        col, cols = self.col[e0:e1], self.num_nodes
        if not self.whole_source:
            if b not in self._sources:  # once for every hop: the graph does not change
                self._sources[b], self._local[b] = torch.unique(col, sorted=True, return_inverse=True)
            col, cols = self._local[b], int(self._sources[b].numel())
        block = _csr((self.crow[r0:r1 + 1] - e0).to(self.device), col.to(self.device),
                     self.values[e0:e1].to(self.device), (r1 - r0, cols))
        if self._keep_blocks:
            self._blocks[b] = block
        return block

    def _gather(self, x: torch.Tensor, b: int) -> torch.Tensor:
        """The rows of ``x`` block ``b`` reads, on the device (through page-locked host memory)."""
        sources = self._sources[b]
        if x.device.type != "cpu":
            return x.index_select(0, sources.to(x.device)).to(self.device)
        staging = torch.empty(sources.numel(), x.size(1), dtype=x.dtype, device="cpu", pin_memory=self._pin)
        torch.index_select(x, 0, sources, out=staging)
        # a page-locked block is not reused before this copy ends (torch's caching host allocator)
        return staging.to(self.device, non_blocking=True)

    def __matmul__(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.size(0) != self.num_nodes:
            raise FeatureError(f"expected a [{self.num_nodes}, c] tensor, got {tuple(getattr(x, 'shape', ()))}")
        n, c = x.shape
        out = torch.empty(n, c, dtype=x.dtype, device="cpu", pin_memory=self._pin)
        source = x.to(self.device) if self.whole_source else None
        for b in range(len(self.bounds) - 1):
            r0, r1 = self.bounds[b], self.bounds[b + 1]
            if int(self.crow[r1]) == int(self.crow[r0]):  # rows without entries (isolated nodes)
                out[r0:r1].zero_()
                continue
            block = self._block(b)
            result = spmm(block, source if source is not None else self._gather(x, b))
            out[r0:r1].copy_(result, non_blocking=True)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the host reads ``out`` next
        return out


def streamed_adjacency(graph: Any, op: GraphOperator, dtype: torch.dtype, device: torch.device, width: int,
                       chunk_rows: Optional[int], max_device_bytes: Optional[int]) -> StreamedAdjacency:
    """``op``'s matrix built in host memory and wrapped for streaming through ``device``."""
    host = graph_structure_on(graph, torch.device("cpu"))
    return StreamedAdjacency(op.adjacency(host, dtype), device, width=width,
                             itemsize=torch.empty(0, dtype=dtype, device="cpu").element_size(),
                             chunk_rows=chunk_rows, max_device_bytes=max_device_bytes)

