r"""The oracle of centroid compression: per-expert k-means at a fixed share of transmitted rows.

LSH-MoE sends one centroid per bucket.  At a fixed budget of ``k_e = max(1, round(rate * n_e))``
centroids for the ``n_e`` rows bound for expert ``e``, the centroid-based compression with the
least input error solves the k-means problem

.. math::
    \min_{c_1..c_k,\ a} \sum_i \lVert x_i - c_{a(i)} \rVert^2 ,

and Lloyd's algorithm from a k-means++ start is its standard heuristic (the exact problem is
NP-hard).  :func:`kmeans_compress` returns the same ``(centroids, counts, bucket)`` triple as
:func:`~sgl.systems.moe.lsh.lsh_compress`, so :class:`KMeansDispatcher` is LSH-MoE with the
hash buckets replaced by these clusters: the reference the LSH buckets are measured against.
"""
from __future__ import annotations

import torch

from sgl._checks import check_int, check_real
from sgl.systems.moe.layer import Dispatcher
from sgl.systems.moe.lsh import LSHDispatcher

__all__ = ["kmeans_compress", "KMeansDispatcher"]


@torch.no_grad()
def _kmeans(x: torch.Tensor, k: int, iters: int, gen: torch.Generator) -> torch.Tensor:
    """Cluster labels ``[n]`` in ``[0, k)`` (k-means++ seeding, then Lloyd)."""
    n = x.shape[0]
    if k >= n:
        return torch.arange(n)
    centers = x[torch.randint(n, (1,), generator=gen)]
    d2 = ((x - centers[0]) ** 2).sum(1)
    for _ in range(1, k):  # k-means++: next centre with probability ~ squared distance
        p = d2 / d2.sum() if float(d2.sum()) > 0 else torch.full_like(d2, 1.0 / n)
        nxt = x[torch.multinomial(p, 1, generator=gen)]
        centers = torch.cat([centers, nxt])
        d2 = torch.minimum(d2, ((x - nxt) ** 2).sum(1))
    labels = torch.cdist(x, centers).argmin(1)
    for _ in range(iters):
        sums = torch.zeros_like(centers).index_add_(0, labels, x)
        size = torch.bincount(labels, minlength=k).unsqueeze(1)
        centers = torch.where(size > 0, sums / size.clamp(min=1), centers)  # an empty cluster keeps its centre
        new = torch.cdist(x, centers).argmin(1)
        if torch.equal(new, labels):
            break
        labels = new
    return labels


def kmeans_compress(rows: torch.Tensor, expert: torch.Tensor, rate: float, num_experts: int,
                    iters: int = 20, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """k-means the rows of each expert to ``max(1, round(rate * n_e))`` clusters (rows grouped by
    expert); ``(centroids, centroid_counts[E], bucket[A])`` as :func:`~sgl.systems.moe.lsh.lsh_compress`.

    >>> rows = torch.tensor([[0.0], [0.1], [5.0], [5.2]])
    >>> c, counts, bucket = kmeans_compress(rows, torch.zeros(4, dtype=torch.long), 0.5, 1)
    >>> counts.tolist(), bucket.tolist(), [round(v, 2) for v in c[:, 0].tolist()]
    ([2], [0, 0, 1, 1], [0.05, 5.1])
    """
    check_real(rate, "compression rate", 0.0, 1.0, open_low=True)
    check_int(iters, "k-means iterations", 0)
    gen = torch.Generator().manual_seed(seed)
    x = rows.detach().float()
    bucket = torch.empty(rows.shape[0], dtype=torch.long)
    counts = torch.zeros(num_experts, dtype=torch.long)
    sizes = torch.bincount(expert, minlength=num_experts).tolist()
    start = offset = 0
    for e, n in enumerate(sizes):
        if n == 0:
            continue
        labels = _kmeans(x[start:start + n], max(1, round(rate * n)), iters, gen)
        # Number clusters by first row (rows of one expert stay contiguous) and drop empty ones.
        _, inverse = torch.unique(labels, return_inverse=True)
        first = torch.full((int(inverse.max()) + 1,), n, dtype=torch.long).scatter_reduce(
            0, inverse, torch.arange(n), "amin")
        renumber = torch.empty_like(first)
        renumber[torch.argsort(first)] = torch.arange(first.numel())
        bucket[start:start + n] = renumber[inverse] + offset
        counts[e] = first.numel()
        offset += first.numel()
        start += n
    bucket = bucket.to(rows.device)
    size = torch.bincount(bucket, minlength=offset).to(rows.dtype)
    centroids = rows.new_zeros(offset, rows.shape[1]).index_add(0, bucket, rows) / size.unsqueeze(1)
    return centroids, counts.to(rows.device), bucket


class KMeansDispatcher(LSHDispatcher):
    """:class:`~sgl.systems.moe.lsh.LSHDispatcher` with k-means clusters at ``rate`` instead of
    hash buckets (``compensate`` as there); seeded per forward, so runs are deterministic."""

    def __init__(self, inner: Dispatcher, dim: int, rate: float = 0.2, seed: int = 0, compensate: bool = True,
                 iters: int = 20) -> None:
        super().__init__(inner, dim, num_hashes=1, seed=seed, compensate=compensate)
        self.rate = check_real(rate, "compression rate", 0.0, 1.0, open_low=True)
        self.iters = iters
        self.seed = seed
        self.calls = 0

    def compress(self, rows: torch.Tensor, expert: torch.Tensor,
                 num_experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        self.calls += 1
        return kmeans_compress(rows, expert, self.rate, num_experts, self.iters, self.seed * 100003 + self.calls)
