"""LSH-MoE (NeurIPS'24): cross-polytope LSH groups the tokens bound for each expert; only bucket
centroids cross the all-to-all; residual error compensation ``y = E(c) + (x - c)``."""
from __future__ import annotations

import torch

from sgl._checks import check_int
from sgl.systems.moe.experts import ExpertBank
from sgl.systems.moe.layer import Dispatcher

__all__ = ["CrossPolytopeLSH", "lsh_compress", "LSHDispatcher"]


class CrossPolytopeLSH:
    r"""``n`` cross-polytope hashes ``h_i(x) = argmax_{j in ±1..±d} (R_i x)_j`` with random rotations.

    ``R_i`` is a seeded uniformly random orthogonal matrix (QR of a Gaussian); the signed argmax
    is coded in ``[0, 2d)``.  A token's bucket is the tuple of its ``n`` codes: more hashes, more
    (smaller) buckets, higher compression rate (transmitted / original rows) and lower error.
    ``proj_dim = r < d`` keeps only ``r`` rotated coordinates (``2r`` buckets per hash, FALCONN's
    ``last_cp_dimension``), for a finer rate knob when an expert gets few tokens.

    >>> lsh = CrossPolytopeLSH(dim=4, num_hashes=2, seed=0)
    >>> lsh(torch.eye(4)).shape
    torch.Size([4, 2])
    """

    def __init__(self, dim: int, num_hashes: int = 6, seed: int = 0, proj_dim: int | None = None) -> None:
        check_int(dim, "LSH dim", 1)
        check_int(num_hashes, "number of hash functions", 1)
        proj = dim if proj_dim is None else check_int(proj_dim, "LSH proj_dim", 1, dim)
        gen = torch.Generator().manual_seed(seed)
        q, r = torch.linalg.qr(torch.randn(num_hashes, dim, dim, generator=gen))
        self.rotations = (q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2))[:, :, :proj]
        self.num_hashes = num_hashes

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        rot = self.rotations.to(x.device)
        rx = torch.einsum("td,nde->tne", x.detach().to(rot.dtype), rot)
        return torch.cat([rx, -rx], dim=-1).argmax(dim=-1)


def lsh_compress(rows: torch.Tensor, expert: torch.Tensor, lsh: CrossPolytopeLSH,
                 num_experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Bucket ``rows`` (grouped by ``expert``) per expert: ``(centroids, centroid_counts[E], bucket[A])``.

    Centroids are grouped by expert like the rows, ``centroids[bucket[a]]`` is row ``a``'s
    centroid (a differentiable scatter-mean).
    """
    key = torch.cat([expert.unsqueeze(1), lsh(rows)], dim=1)
    uniq, inverse = torch.unique(key, dim=0, return_inverse=True)
    # Number buckets by their first row: rows are grouped by expert, so buckets are too, and
    # with one token per bucket the centroids are the rows in their own order (bitwise exact).
    n = rows.shape[0]
    first = torch.full((uniq.shape[0],), n, dtype=torch.long, device=rows.device).scatter_reduce(
        0, inverse, torch.arange(n, device=rows.device), "amin")
    order = torch.argsort(first)
    renumber = torch.empty_like(order)
    renumber[order] = torch.arange(order.numel(), device=order.device)
    uniq, bucket = uniq[order], renumber[inverse]
    size = torch.bincount(bucket, minlength=uniq.shape[0]).to(rows.dtype)
    centroids = rows.new_zeros(uniq.shape[0], rows.shape[1]).index_add(0, bucket, rows) / size.unsqueeze(1)
    return centroids, torch.bincount(uniq[:, 0], minlength=num_experts), bucket


class LSHDispatcher(Dispatcher):
    """Compress before an inner dispatcher (EP, or local): only centroids are exchanged.

    ``compensate=False`` drops the residual term (``y = E(c)``), for the ablation; ``enabled =
    False`` sends the rows uncompressed (to evaluate an LSH-trained model exactly).
    ``routed_rows`` counts the rows before compression, ``sent_rows`` those sent.
    """

    def __init__(self, inner: Dispatcher, dim: int, num_hashes: int = 6, seed: int = 0,
                 compensate: bool = True, proj_dim: int | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.lsh = CrossPolytopeLSH(dim, num_hashes, seed, proj_dim)
        self.compensate = compensate
        self.routed_rows = 0
        self.routing_ranks = inner.routing_ranks
        self.enabled = True

    def global_counts(self, counts: torch.Tensor) -> torch.Tensor:
        return self.inner.global_counts(counts)

    @property
    def sent_rows(self) -> int:  # type: ignore[override]
        return self.inner.sent_rows

    @sent_rows.setter
    def sent_rows(self, value: int) -> None:
        pass  # the inner dispatcher counts what goes on the wire

    def compress(self, rows: torch.Tensor, expert: torch.Tensor,
                 num_experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(centroids, centroid_counts[E], bucket[A])`` of the rows bound for each expert."""
        return lsh_compress(rows, expert, self.lsh, num_experts)

    def exchange(self, rows: torch.Tensor, counts: torch.Tensor, bank: ExpertBank) -> torch.Tensor:
        if not self.enabled:
            return self.inner.exchange(rows, counts, bank)
        expert = torch.arange(counts.numel(), device=rows.device).repeat_interleave(counts)
        centroids, c_counts, bucket = self.compress(rows, expert, counts.numel())
        self.routed_rows += rows.shape[0]
        out = self.inner.exchange(centroids, c_counts, bank)[bucket]
        return out + (rows - centroids[bucket]) if self.compensate else out
