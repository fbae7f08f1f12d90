r"""Masked sparse products of 0/1 matrices, reduced to sums: the one kernel motif counting needs.

For 0/1 CSR matrices ``L`` (``n × k``), ``R`` (``k × m``) and a mask ``M`` (``n × m``), the
masked product :math:`P = (L R) \odot M` counts, at ``(i, j)``, the two-step paths
``i → k → j`` that land on a mask entry. Counting motifs needs only its three marginals

.. math::

    \text{rows}_i = \sum_j P_{ij}, \qquad \text{cols}_j = \sum_i P_{ij}, \qquad
    \text{mids}_k = \sum_{i, j} L_{ik} R_{kj} M_{ij},

(``mids`` credits the middle vertex of each path: for ``L = R = M`` = the upward-oriented
graph it is the number of triangles in which ``k`` is the middle vertex). SciPy has no masked
product, and ``(L @ R).multiply(M)`` materialises every path end, masked or not. The default
engine is GraphBLAS's masked "saxpy" product with a dense marker: row ``i`` of the mask is
marked, the paths leaving ``i`` are walked, and each one that lands on a mark is counted on
the spot, with no symbolic pass and no output matrix. Several *disjoint* masks (the three
neighbour types of a directed graph) share one walk, the marker holding the mask's label.
``engine="scipy"`` computes the same sums with SciPy products (the reference in the tests).

    >>> import scipy.sparse as sp
    >>> up = sp.csr_matrix([[0, 1, 1], [0, 0, 1], [0, 0, 0]])   # a triangle, edges pointing up
    >>> ((rows, cols, mids),) = masked_product_sums(up, up, [up])
    >>> rows.tolist(), cols.tolist(), mids.tolist()
    ([1, 0, 0], [0, 0, 1], [0, 1, 0])
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from sgl._checks import check_choice
from sgl.errors import GraphError

__all__ = ["masked_product_sums", "ENGINES"]

ENGINES = ("numba", "scipy")
Sums = Tuple[np.ndarray, np.ndarray, np.ndarray]

_KERNEL = None


def _walk(l_ptr, l_idx, r_ptr, r_idx, m_ptr, m_idx, m_label, rows, cols, mids):  # pragma: no cover - numba
    # label 0 (no mask entry) is counted too, in row 0 of the outputs: the walk has no branch
    labels = rows.shape[0]
    marker = np.zeros(cols.shape[1], dtype=np.int64)
    at_i = np.zeros(labels, dtype=np.int64)
    at_k = np.zeros(labels, dtype=np.int64)
    for i in range(l_ptr.size - 1):
        for p in range(m_ptr[i], m_ptr[i + 1]):
            marker[m_idx[p]] = m_label[p]
        at_i[:] = 0
        for p in range(l_ptr[i], l_ptr[i + 1]):
            k = l_idx[p]
            at_k[:] = 0
            for q in range(r_ptr[k], r_ptr[k + 1]):
                j = r_idx[q]
                label = marker[j]
                at_k[label] += 1
                cols[label, j] += 1
            for c in range(1, labels):
                mids[c, k] += at_k[c]
                at_i[c] += at_k[c]
        for c in range(1, labels):
            rows[c, i] += at_i[c]
        for p in range(m_ptr[i], m_ptr[i + 1]):
            marker[m_idx[p]] = 0


def _kernel():
    """The loop above compiled by numba on first use (importing numba costs every CLI start)."""
    global _KERNEL
    if _KERNEL is None:
        import numba

        _KERNEL = numba.njit(cache=True, nogil=True)(_walk)
    return _KERNEL


def _labelled_mask(masks: Sequence[sp.csr_matrix], shape: Tuple[int, int]) -> sp.csr_matrix:
    if len(masks) == 1:
        return sp.csr_matrix((np.ones(masks[0].nnz, dtype=np.int8), masks[0].indices, masks[0].indptr), shape=shape)
    stacked = sum((sp.csr_matrix((np.full(m.nnz, k + 1, dtype=np.int8), m.indices, m.indptr), shape=shape)
                   for k, m in enumerate(masks)), sp.csr_matrix(shape, dtype=np.int8)).tocsr()
    if stacked.nnz != sum(m.nnz for m in masks):
        raise GraphError("masked_product_sums needs disjoint masks (no entry in two of them)")
    return stacked


def _numba_sums(left: sp.csr_matrix, right: sp.csr_matrix, masks: Sequence[sp.csr_matrix]) -> List[Sums]:
    n, k = left.shape
    m = right.shape[1]
    mask = _labelled_mask(masks, (n, m))
    rows = np.zeros((len(masks) + 1, n), dtype=np.int64)
    cols = np.zeros((len(masks) + 1, m), dtype=np.int64)
    mids = np.zeros((len(masks) + 1, k), dtype=np.int64)
    as_int = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731 - one dtype, one compilation
    _kernel()(as_int(left.indptr), as_int(left.indices), as_int(right.indptr), as_int(right.indices),
              as_int(mask.indptr), as_int(mask.indices), as_int(mask.data),
              rows, cols, mids)
    return [(rows[c], cols[c], mids[c]) for c in range(1, len(masks) + 1)]


def _scipy_sums(left: sp.csr_matrix, right: sp.csr_matrix, masks: Sequence[sp.csr_matrix]) -> List[Sums]:
    product = (left @ right).tocsr()
    out = []
    for mask in masks:
        masked = product.multiply(mask)
        through = left.multiply(mask @ right.T)  # L_ik (M Rᵀ)_ik = sum_j L_ik R_kj M_ij
        out.append(tuple(np.asarray(x.sum(axis=axis, dtype=np.int64)).ravel()
                         for x, axis in ((masked, 1), (masked, 0), (through, 0))))
    return out  # type: ignore[return-value]


def masked_product_sums(left: sp.csr_matrix, right: sp.csr_matrix, masks: Sequence[sp.csr_matrix],
                        engine: str = "numba") -> List[Sums]:
    """``(rows, cols, mids)`` of ``(left @ right) ⊙ mask`` for each of the disjoint 0/1 ``masks``.

    Args:
        left, right: 0/1 CSR matrices (stored values are taken as 1).
        masks: 0/1 CSR matrices of ``left.shape[0] × right.shape[1]`` with no common entry.
        engine: ``"numba"`` (masked saxpy, no output matrix) or ``"scipy"`` (SpGEMM then mask).
    """
    check_choice(engine, "engine", ENGINES)
    if left.shape[1] != right.shape[0] or any(m.shape != (left.shape[0], right.shape[1]) for m in masks):
        raise GraphError(f"masked_product_sums: shapes {left.shape} @ {right.shape} do not match the masks "
                         f"{[m.shape for m in masks]}")
    if not masks:
        return []
    csr = [sp.csr_matrix(x) for x in (left, right)]
    masks = [sp.csr_matrix(m) for m in masks]
    return (_numba_sums if engine == "numba" else _scipy_sums)(csr[0], csr[1], masks)
