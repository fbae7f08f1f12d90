r"""Multi-hop feature propagation with bounded memory: ``[X, MX, M^2X, ..., M^kX]``.

This is the precompute step of every scalable (SGAP) model. Memory is bounded in three ways:

* **No redundant copies.** Hop 0 is the caller's ``x`` itself; each hop is written once.
* **Column chunks.** Every graph operator acts on feature columns independently, so the
  features are processed ``chunk_size`` columns at a time; temporaries are
  ``O(num_nodes * chunk_size)`` instead of ``O(num_nodes * d)``.
* **On-disk hops.** With ``out_dir`` the hops go to ``hop_<i>.npy`` files and come back
  memory-mapped, so resident memory stays near ``x`` + graph + one chunk whatever ``k`` is.
  The files are column-major (``fortran_order``) so each column chunk is written
  sequentially; the returned tensors are ``[num_nodes, d]`` views with strides ``(1, n)``
  (call ``.contiguous()`` for a row-major copy in memory).

An optional cache (``cache_dir``) stores the hops under a key made of the graph's
content hash, the features' hash, the operator's configuration and ``k``; a second call
with the same inputs reads them back instead of recomputing.

**Devices.** Hops are computed on ``device`` (default: the device of ``x``). On the CPU the
fused numba kernel (:mod:`sgl.ops.kernels`) writes each hop into memory allocated the way
this machine measured fastest (:mod:`sgl.ops.allocation`). On a GPU the hops stay on it when
they fit (``torch.sparse.mm``, cuSPARSE); when they do not, or with ``chunk_rows``, the matrix
stays on the host and row blocks are streamed through the device into page-locked host hops
or ``out_dir`` (:mod:`sgl.ops.propagate_device`).

Example:
    >>> import torch
    >>> from sgl.data import Graph
    >>> from sgl.ops import propagate_hops
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]))
    >>> hops = propagate_hops(g, torch.eye(3), k=2)
    >>> [tuple(h.shape) for h in hops]
    [(3, 3), (3, 3), (3, 3)]
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, List, Optional, Union

import numpy as np
import torch

from sgl.data.validation import check_features
from sgl.errors import CacheError, ConfigError, GraphError
from sgl.fileio import atomic_dir, atomic_write
from sgl.ops.graph_ops import GraphOperator, get_operator

__all__ = ["propagate_hops", "propagation_cache_key", "DEFAULT_CHUNK_BYTES"]

#: Default budget for the per-chunk temporaries when hops are written to disk. ATen's CSR
#: kernel slows down sharply below ~64 columns, so this is sized for 64 columns at 1M nodes.
DEFAULT_CHUNK_BYTES = 512 * 2**20
_WRITE_BLOCK_BYTES = 8 * 2**20
_MANIFEST = "manifest.json"


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    # disable=None: no bar when stderr is not a terminal (logs, CI), as tqdm recommends
    return tqdm(total=total, desc=desc, unit="step", leave=False, disable=None)


def _tensor_digest(t: torch.Tensor) -> str:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{tuple(t.shape)}{t.dtype}".encode())
    digest.update(t.detach().contiguous().cpu().numpy().tobytes())  # hashing is host-only
    return digest.hexdigest()


def propagation_cache_key(graph: Any, x: torch.Tensor, k: int, op: GraphOperator) -> str:
    """Hex key of (graph content, feature content, operator configuration, k)."""
    parts = [graph.content_hash(), _tensor_digest(x), op.cache_key(), str(int(k))]
    return hashlib.blake2b("|".join(parts).encode(), digest_size=20).hexdigest()


def _auto_chunk(num_nodes: int, dim: int, op: GraphOperator, budget: int, itemsize: int) -> int:
    # input block + the operator's temporaries (the transposed write-out buffer is small)
    per_column = num_nodes * itemsize * (1 + op.workspace_factor())
    return int(max(1, min(dim, budget // max(per_column, 1))))


def _open_hops(folder: Path, k: int) -> List[torch.Tensor]:
    hops = []
    for i in range(1, k + 1):
        path = folder / f"hop_{i}.npy"
        try:
            # mode "c" (copy-on-write): writable tensors for torch, file left untouched.
            array = np.load(path, mmap_mode="c")
        except (OSError, ValueError, EOFError) as exc:
            raise CacheError(f"hop file {path} is unreadable ({exc}); delete {folder} and recompute") from exc
        hops.append(torch.from_numpy(array))
    return hops


def _compute_in_memory(adj, x, k, op, chunk_size, bar) -> List[torch.Tensor]:
    n, d = x.shape
    if chunk_size >= d:
        hops = [x]
        for _ in range(k):
            hops.append(op.apply(adj, hops[-1]))
            if bar is not None:
                bar.update(1)
        return hops
    outs = [torch.empty(n, d, dtype=x.dtype, device=x.device) for _ in range(k)]
    for start in range(0, d, chunk_size):
        block = x[:, start:start + chunk_size].contiguous()
        for out in outs:
            block = op.apply(adj, block)
            out[:, start:start + chunk_size] = block
            if bar is not None:
                bar.update(1)
    return [x] + outs


def _kernel_in_memory(fused, x, k, chunk_size, store_dtype, bar) -> List[torch.Tensor]:
    """Every hop written by the fused kernel straight into its preallocated output.

    Column blocks are computed in place in the outputs (no block copies); with a reduced
    ``store_dtype`` the input is converted once so every hop gathers half-size rows. Outputs
    (and that converted input) are allocated by :func:`sgl.ops.allocation.empty_rows` the way
    this machine measured fastest: huge pages faulted in by the kernel's own threads as they
    write their rows, or populated at once.
    """
    from sgl.ops.kernels import csr_spmm, empty_rows

    n, d = x.shape
    outs = [empty_rows(n, d, store_dtype) for _ in range(k)]
    if store_dtype == x.dtype:
        source = x.contiguous()
    else:
        source = empty_rows(n, d, store_dtype)
        source.copy_(x)
    for start in range(0, d, chunk_size):
        cols = (start, min(d, start + chunk_size))
        prev = source
        for out in outs:
            csr_spmm(fused, prev, out, columns=cols)
            prev = out
            if bar is not None:
                bar.update(1)
    return [x] + outs


def _compute_to_disk(apply, x, k, chunk_size, folder: Path, bar) -> None:
    """Write hops as column-major (Fortran-order) ``.npy`` files, one column chunk at a time.

    A column chunk of a Fortran-order array is one contiguous byte range, so every chunk
    is a single sequential ``write`` through the page cache: nothing is memory-mapped
    while writing, so the hops never count towards this process's resident memory.
    """
    n, d = x.shape
    dtype = np.dtype(str(x.dtype).replace("torch.", ""))
    handles, offsets = [], []
    try:
        for i in range(1, k + 1):
            handle = open(folder / f"hop_{i}.npy", "wb")
            np.lib.format.write_array_header_1_0(
                handle, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": True, "shape": (n, d)})
            handles.append(handle)
            offsets.append(handle.tell())
        rows = max(1, _WRITE_BLOCK_BYTES // (chunk_size * dtype.itemsize))
        for start in range(0, d, chunk_size):
            block = x[:, start:start + chunk_size].contiguous()
            for handle, offset in zip(handles, offsets):
                block = apply(block)  # on the compute device; the next hop starts from it there
                host = block if block.device.type == "cpu" else block.cpu()
                width = block.size(1)
                # transpose a few rows at a time so no second chunk-sized buffer is needed;
                # column j of the chunk is one contiguous run of n values in the file
                for r0 in range(0, n, rows):
                    piece = host[r0:r0 + rows].t().contiguous().numpy()
                    for j in range(width):
                        handle.seek(offset + ((start + j) * n + r0) * dtype.itemsize)
                        handle.write(memoryview(piece[j]).cast("B"))
                if bar is not None:
                    bar.update(1)
    finally:
        for handle in handles:
            handle.close()


def _use_kernel(kernel: str, op: GraphOperator, dtype: torch.dtype, where: Optional[str] = None) -> bool:
    """Whether the fused (host-only) kernel runs; ``where`` says why it cannot (a device, streaming)."""
    from sgl.ops.kernels import KERNEL_DTYPES, kernel_supports

    if kernel not in ("auto", "fused", "aten"):
        raise ConfigError(f"kernel must be 'auto', 'fused' or 'aten', got {kernel!r}")
    if kernel == "aten":
        return False
    if where is not None:
        if kernel == "fused":
            raise ConfigError(f"the fused kernel is host-only (numba) and computes the whole graph in host memory, "
                              f"but this propagation runs {where}; use kernel='auto' or 'aten'")
        return False
    ok = kernel_supports(op) and dtype in KERNEL_DTYPES
    if kernel == "fused" and not ok:
        raise ConfigError(f"the fused kernel computes the 'adj' and 'lazy' operators on {KERNEL_DTYPES}, "
                          f"not {type(op).__name__} on {dtype}; use kernel='auto'")
    return ok


def _check_store_dtype(dtype: Optional[torch.dtype], x: torch.Tensor, on_disk: bool) -> torch.dtype:
    if dtype is None:
        return x.dtype
    if dtype not in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        raise ConfigError(f"dtype must be torch.float32, float64, bfloat16 or float16, got {dtype!r}")
    if dtype != x.dtype and on_disk:
        raise ConfigError("reduced-precision hops (dtype=...) are kept in memory only; drop out_dir/cache_dir "
                          "or dtype")
    return dtype


def _check_optional_positive(value: Any, name: str, what: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name} must be a positive integer number of {what} or None, got {value!r}")
    return int(value)


def propagate_hops(
    graph: Any,
    x: Optional[Any] = None,
    k: int = 3,
    op: Union[str, GraphOperator] = "adj",
    *,
    chunk_size: Optional[int] = None,
    out_dir: Optional[Union[str, os.PathLike]] = None,
    cache_dir: Optional[Union[str, os.PathLike]] = None,
    max_chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: bool = False,
    dtype: Optional[torch.dtype] = None,
    kernel: str = "auto",
    device: Any = None,
    chunk_rows: Optional[int] = None,
    max_device_bytes: Optional[int] = None,
) -> List[torch.Tensor]:
    r"""Return ``[X, MX, ..., M^k X]`` for the graph operator ``op`` (default :math:`\hat A_{0.5}`).

    Args:
        graph (Graph): the graph (its structure is moved to ``device`` when it is elsewhere).
        x (Tensor, optional): ``[num_nodes, d]`` features; defaults to ``graph.x``.
        k (int): number of hops (``k=0`` returns ``[x]``).
        op (str or GraphOperator): operator or its name (see :func:`sgl.ops.get_operator`).
        chunk_size (int, optional): feature columns per chunk. In memory the default is all
            columns (each hop is written straight into its output, no temporaries); on disk
            it is chosen so the chunk temporaries fit ``max_chunk_bytes``.
        out_dir (path, optional): write hops 1..k to ``out_dir/hop_<i>.npy`` and return them
            memory-mapped (copy-on-write: in-place edits never reach the files).
        cache_dir (path, optional): reuse hops stored under
            ``cache_dir/<propagation_cache_key>/``; computes and stores them on a miss.
            Cached hops are returned memory-mapped.
        max_chunk_bytes (int): temporaries budget used to pick ``chunk_size`` on disk.
        progress (bool): show a tqdm progress bar.
        dtype (torch.dtype, optional): storage dtype of hops 1..k (in memory only).
            ``torch.bfloat16``/``torch.float16`` halve the bytes every hop gathers
            (float32 accumulation; ``x`` is rounded to it once); hop 0 stays ``x``.
        kernel (str): ``"auto"`` (on the CPU in memory, the fused parallel kernel of
            :mod:`sgl.ops.kernels` for the ``adj``/``lazy`` operators; torch's CSR SpMM
            otherwise, on other devices and on disk, where writing bounds the time),
            ``"fused"`` (require the kernel, also on disk; host only) or ``"aten"`` (always
            torch's CSR SpMM: ATen's kernel on the CPU, cuSPARSE on CUDA).
        device (str or torch.device, optional): where to compute (default: the device of
            ``x``); ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a GPU index. Hops stay on it when
            the matrix, ``x`` and the hops fit ``max_device_bytes``; otherwise the matrix stays
            on the host and row blocks are streamed through the device (see
            :mod:`sgl.ops.propagate_device`): hops 1..k come back in host memory
            (page-locked on CUDA) or in ``out_dir``.
        chunk_rows (int, optional): stream ``chunk_rows`` destination rows at a time through
            the device (forces the streamed mode; default: sized from ``max_device_bytes``).
        max_device_bytes (int, optional): device memory to plan for (default: 80 % of a CUDA
            device's free memory; no bound on the CPU).

    Returns:
        list of ``k + 1`` tensors; element 0 is ``x`` itself (not a copy), moved to ``device``
        when the hops are computed there from features held elsewhere.

    Raises:
        DeviceError: ``device`` is malformed or unavailable (``"cuda:7"`` without that GPU).
        ConfigError: an option is invalid or does not apply (``kernel="fused"`` on a GPU or
            with ``chunk_rows``).

    Example (streamed in blocks of 2 rows; the same code sends them through a GPU):
        >>> import torch
        >>> from sgl.data import Graph
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 1, 2, 3], [1, 0, 2, 1, 0]]))
        >>> x = torch.randn(4, 3)
        >>> a = propagate_hops(g, x, k=2)
        >>> b = propagate_hops(g, x, k=2, device="cpu", chunk_rows=2)
        >>> all(torch.allclose(u, v) for u, v in zip(a, b))
        True
    """
    from sgl.ops import propagate_device as pd

    if x is None:
        x = graph.x
        if x is None:
            raise GraphError("the graph has no features; pass x=... to propagate_hops")
    x = check_features(x, graph.num_nodes)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ConfigError(f"k must be a non-negative integer number of hops, got {k!r}")
    k = int(k)
    chunk_size = _check_optional_positive(chunk_size, "chunk_size", "columns")
    chunk_rows = _check_optional_positive(chunk_rows, "chunk_rows", "rows")
    max_device_bytes = _check_optional_positive(max_device_bytes, "max_device_bytes", "bytes")
    target = pd.compute_device(device, x)
    op = get_operator(op)
    on_disk = out_dir is not None or cache_dir is not None
    store = _check_store_dtype(dtype, x, on_disk)
    n, d = x.shape
    if on_disk:
        chunk = min(chunk_size or _auto_chunk(n, d, op, max_chunk_bytes, x.element_size()), d)
    else:
        chunk = d if chunk_size is None else min(chunk_size, d)
    mode = pd.plan_device(graph, x, k, op, target, chunk, on_disk, chunk_rows, max_device_bytes)
    where = None if target.type == "cpu" and mode == "resident" else (
        f"on {target}" if mode == "resident" else f"streamed in row blocks through {target}")
    fused = _use_kernel(kernel, op, x.dtype, where) and (store == x.dtype or _use_kernel(kernel, op, store, where))
    if mode == "resident":
        x = x.to(target)  # the caller's tensor when it is there already
    if k == 0:
        return [x]

    def matrix():
        """What one hop multiplies by: the operator's matrix on ``target``, or streamed through it."""
        if mode == "streamed":
            return pd.streamed_adjacency(graph, op, x.dtype, target, chunk, chunk_rows, max_device_bytes)
        return op.adjacency(pd.graph_structure_on(graph, target), x.dtype)

    source = x if mode == "resident" else x.cpu()  # streamed products read host memory
    on_disk_fused = fused and kernel == "fused"
    if cache_dir is not None:
        entry = Path(cache_dir) / propagation_cache_key(graph, x, k, op)
        if (entry / _MANIFEST).exists():
            return [x] + _open_hops(entry, k)
        with atomic_dir(entry) as tmp:
            _propagate_to_folder(graph, source, k, op, chunk, tmp, progress,
                                 _disk_apply(graph, op, matrix, on_disk_fused, x.dtype))
        return [x] + _open_hops(entry, k)

    if out_dir is not None:
        folder = Path(out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        _propagate_to_folder(graph, source, k, op, chunk, folder, progress,
                             _disk_apply(graph, op, matrix, on_disk_fused, x.dtype))
        return [x] + _open_hops(folder, k)

    steps = k * -(-d // chunk)
    bar = _progress(steps, progress, "propagate")
    try:
        if fused:
            from sgl.ops.kernels import fused_adjacency

            acc = torch.float64 if x.dtype == torch.float64 else torch.float32
            host = pd.graph_structure_on(graph, torch.device("cpu"))
            return _kernel_in_memory(fused_adjacency(host, op, acc), x, k, chunk, store, bar)
        hops = _compute_in_memory(matrix(), source, k, op, chunk, bar)
        hops = hops if store == x.dtype else [source] + [h.to(store) for h in hops[1:]]
        return [x] + hops[1:]
    finally:
        if bar is not None:
            bar.close()


def _disk_apply(graph, op, matrix, fused: bool, dtype: torch.dtype):
    """One hop of a column block for the on-disk writer: the fused kernel, or ``op`` on ``matrix()``."""
    if fused:
        from sgl.ops.kernels import csr_spmm, fused_adjacency
        from sgl.ops.propagate_device import graph_structure_on

        adj = fused_adjacency(graph_structure_on(graph, torch.device("cpu")), op,
                              torch.float64 if dtype == torch.float64 else torch.float32)
        return lambda block: csr_spmm(adj, block)
    adj = matrix()
    device = adj.device if isinstance(adj, torch.Tensor) else torch.device("cpu")
    return lambda block: op.apply(adj, block.to(device))


def _propagate_to_folder(graph, x, k, op, chunk: int, folder: Path, progress: bool, apply) -> None:
    n, d = x.shape
    bar = _progress(k * -(-d // chunk), progress, "propagate")
    try:
        _compute_to_disk(apply, x, k, chunk, folder, bar)
    finally:
        if bar is not None:
            bar.close()
    manifest = {"k": k, "shape": [n, d], "dtype": str(x.dtype), "operator": op.config(),
                "num_nodes": n, "num_edges": graph.num_edges}
    with atomic_write(folder / _MANIFEST, "w") as handle:
        json.dump(manifest, handle, indent=2)
