r"""Spectral vertex embedding of a weighted graph (Laplacian eigenmaps on the motif graph).

With weights :math:`W` and degrees :math:`D = \operatorname{diag}(W \mathbf 1)`, the normalised
Laplacian is :math:`L = I - D^{-1/2} W D^{-1/2}`. The embedding is the ``dim`` eigenvectors of
``L`` with the smallest eigenvalues after the first (the largest of :math:`D^{-1/2} W D^{-1/2}`,
found by ARPACK ``eigsh``). Each eigenvector :math:`\psi_k` is scaled by its eigenvalue
:math:`\mu_k` of the normalised adjacency (a one-step diffusion map, Coifman & Lafon 2006, so
that noisy directions with small :math:`\mu_k` weigh little), and rows are scaled to unit length
(Ng, Jordan & Weiss 2001). Vertices without weight get a zero row. On ``W = λS + (1 − λ)W_M`` this is the spectral embedding of the
motif Laplacian that motif-conductance clustering (Benson et al. 2016) partitions.

    >>> import numpy as np, scipy.sparse as sp
    >>> two_cliques = sp.block_diag([np.ones((3, 3)) - np.eye(3)] * 2, format="csr")
    >>> emb = spectral_embedding(two_cliques + sp.csr_matrix(([0.1, 0.1], ([2, 3], [3, 2])), shape=(6, 6)), 1)
    >>> bool(emb[0, 0] * emb[5, 0] < 0)   # the two cliques land on opposite sides
    True
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

from sgl._checks import check_int
from sgl.errors import ConfigError, GraphError

__all__ = ["spectral_embedding"]

#: below this many vertices a dense eigendecomposition is cheaper and always converges
_DENSE_BELOW = 600


def spectral_embedding(weights: sp.spmatrix, dim: int, seed: int = 0) -> torch.Tensor:
    """``[n, dim]`` float32 spectral embedding of the symmetric non-negative ``weights``."""
    dim = check_int(dim, "dim", minimum=1)
    w = sp.csr_matrix(weights, dtype=np.float64)
    n = w.shape[0]
    if w.shape != (n, n):
        raise GraphError(f"spectral_embedding needs a square weight matrix, got shape {w.shape}")
    if dim + 1 >= n:
        raise ConfigError(f"dim={dim} needs a graph of more than dim + 1 = {dim + 1} vertices, this one has {n}")
    if w.nnz and (abs(w - w.T) > 1e-9 * abs(w).max()).nnz:
        raise GraphError("spectral_embedding needs symmetric weights (an undirected graph)")
    degree = np.asarray(w.sum(axis=1)).ravel()
    inv_sqrt = np.divide(1.0, np.sqrt(degree), out=np.zeros(n), where=degree > 0)
    normalized = (sp.diags(inv_sqrt) @ w @ sp.diags(inv_sqrt)).tocsr()
    if n < _DENSE_BELOW:
        values, vectors = np.linalg.eigh(normalized.toarray())
    else:
        v0 = np.random.default_rng(seed).random(n)
        try:
            values, vectors = spla.eigsh(normalized, k=dim + 1, which="LA", v0=v0, maxiter=max(5000, 20 * n))
        except spla.ArpackNoConvergence as exc:
            raise ConfigError(f"the eigensolver did not converge for dim={dim}; try a smaller dim") from exc
    top = np.argsort(-values)[1:dim + 1]
    emb = vectors[:, top] * np.clip(values[top], 0.0, None) * (degree > 0)[:, None]
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    emb = np.divide(emb, norms, out=np.zeros_like(emb), where=norms > 0)
    # eigenvectors have no sign: fix it (largest-|entry| positive) so runs are reproducible
    signs = np.sign(emb[np.abs(emb).argmax(axis=0), np.arange(emb.shape[1])])
    return torch.from_numpy((emb * np.where(signs == 0, 1, signs)).astype(np.float32))
