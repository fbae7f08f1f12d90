"""Coarse semantic clustering of document embeddings: faiss k-means and an ISODATA-style variant.

Embeddings have unit rows, so "nearest centre" is the largest inner product (spherical k-means:
centres are re-normalised means). :func:`kmeans_centroids` is ``faiss.Kmeans(spherical=True)``.
:func:`isodata_centroids` is DataSculpt's phase-1 loop: start from k-means, then repeat
*assign → recompute means → split → merge* until the centres move less than ``tol`` in total
(Σ_c ||μ_c^new − μ_c||) or ``max_iter`` rounds: a cluster with more than ``max_size`` members
or a mean member-to-centre cosine below ``min_cohesion`` is split in two by 2-means; two
centres with cosine above ``merge_cosine`` are merged (size-weighted). :func:`assign_clusters`
labels rows in chunks, so a memory-mapped embedding file larger than memory can be assigned.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> x = np.concatenate([rng.normal(0, .1, (20, 4)) + e for e in np.eye(4)[:2]]).astype("float32")
>>> x /= np.linalg.norm(x, axis=1, keepdims=True)
>>> labels = assign_clusters(x, kmeans_centroids(x, 2, seed=0))
>>> len(set(labels[:20].tolist())), len(set(labels[20:].tolist())), bool(labels[0] != labels[20])
(1, 1, True)
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError

__all__ = ["kmeans_centroids", "isodata_centroids", "assign_clusters"]


def _faiss():
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise ConfigError("clustering needs faiss: pip install faiss-cpu") from exc
    return faiss


def _rows(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ConfigError(f"embeddings must be a non-empty [n, d] array, got shape {x.shape}")
    return x


def _unit(c: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(c, axis=1, keepdims=True)
    return np.ascontiguousarray(c / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def kmeans_centroids(x: np.ndarray, k: int, *, niter: int = 20, seed: int = 0) -> np.ndarray:
    """``min(k, n)`` unit centres of spherical k-means (faiss), deterministic under ``seed``."""
    x = _rows(x)
    k = min(check_int(k, "num_clusters", minimum=1), x.shape[0])
    if k == 1:
        return _unit(x.mean(0, keepdims=True) + 1e-12)
    km = _faiss().Kmeans(x.shape[1], k, niter=check_int(niter, "niter", minimum=1), seed=seed, spherical=True,
                         verbose=False, min_points_per_centroid=1, max_points_per_centroid=256)
    km.train(x)
    return np.ascontiguousarray(km.centroids, dtype=np.float32)


def assign_clusters(x: np.ndarray, centroids: np.ndarray, *, chunk_size: int = 65_536) -> np.ndarray:
    """Index of the nearest centre (largest inner product) of every row, read ``chunk_size`` rows at a time."""
    centroids = _rows(centroids)
    index = _faiss().IndexFlatIP(centroids.shape[1])
    index.add(centroids)
    out = np.empty(x.shape[0], dtype=np.int64)
    for begin in range(0, x.shape[0], chunk_size):
        block = np.ascontiguousarray(x[begin:begin + chunk_size], dtype=np.float32)
        _, nearest = index.search(block, 1)
        out[begin:begin + block.shape[0]] = nearest[:, 0]
    return out


def isodata_centroids(x: np.ndarray, k: int, *, max_size: Optional[int] = None, min_cohesion: float = 0.0,
                      merge_cosine: float = 0.95, max_iter: int = 10, tol: float = 1e-3,
                      seed: int = 0) -> np.ndarray:
    """ISODATA-style centres: k-means start, then split/merge rounds (see the module docstring)."""
    x = _rows(x)
    n = x.shape[0]
    max_size = n if max_size is None else check_int(max_size, "max_size", minimum=1)
    check_real(min_cohesion, "min_cohesion", -1.0, 1.0)
    check_real(merge_cosine, "merge_cosine", -1.0, 1.0)
    check_int(max_iter, "max_iter", minimum=1)
    centres = kmeans_centroids(x, k, seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(max_iter):
        labels = assign_clusters(x, centres)
        sizes = np.bincount(labels, minlength=len(centres))
        sums = np.zeros_like(centres)
        np.add.at(sums, labels, x)
        keep = sizes > 0
        means = _unit(sums[keep])
        moved = float(np.linalg.norm(means - centres[keep], axis=1).sum()) + float((~keep).sum())
        sizes = sizes[keep]
        remap = np.cumsum(keep) - 1
        labels = remap[labels]
        cohesion = np.bincount(labels, weights=(x * means[labels]).sum(1), minlength=len(means)) / sizes
        changed = False
        new: list = []
        for c in range(len(means)):
            if sizes[c] >= 4 and (sizes[c] > max_size or cohesion[c] < min_cohesion):
                members = x[labels == c]
                halves = kmeans_centroids(members, 2, niter=10, seed=int(rng.integers(1 << 30)))
                new.extend(halves)
                changed = True
            else:
                new.append(means[c])
        centres = _unit(np.stack(new))
        if len(centres) > 1:
            sims = centres @ centres.T
            np.fill_diagonal(sims, -np.inf)
            weights = np.bincount(assign_clusters(x, centres), minlength=len(centres)).astype(np.float64)
            alive = np.ones(len(centres), dtype=bool)
            mass = centres * weights[:, None]
            for flat in np.argsort(-sims, axis=None, kind="stable"):
                a, b = divmod(int(flat), len(centres))
                if sims[a, b] < merge_cosine:
                    break
                if a < b and alive[a] and alive[b]:
                    mass[a] += mass[b]
                    alive[b] = False
                    changed = True
            centres = _unit(np.where(weights[:, None] > 0, mass, centres)[alive])
        if not changed and moved < tol:
            break
    return centres
