"""Product quantization of attention keys (faiss) for PQCache.

Keys ``k ∈ R^d`` of one (layer, KV head) are split into ``m`` sub-vectors of ``d/m`` dims;
each sub-space gets ``2^b`` k-means centroids ``C_j`` (faiss ``ProductQuantizer``) and a key
is stored as its ``m`` centroid ids. At decode the query's sub-vectors give a table
``S[j, c] = <q_j, C_j[c]>`` and a token's approximate score is ``Σ_j S[j, code_j(t)]``,
``O(m 2^b + T m)`` work instead of ``O(T d)``.

>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> keys = torch.randn(2, 300, 8, generator=g)
>>> index = PQIndex.fit(keys, num_subvectors=2, bits=4)
>>> index.codes.shape, index.codes.dtype, index.centroids.shape      # codes: one byte per id (b <= 8)
(torch.Size([2, 300, 2]), torch.uint8, torch.Size([2, 2, 16, 4]))
>>> q = torch.randn(2, 1, 8, generator=g)
>>> approx, exact = index.scores(q), q @ keys.transpose(1, 2)     # [heads, 1, tokens]
>>> bool(torch.corrcoef(torch.stack([approx.flatten(), exact.flatten()]))[0, 1] > 0.8)
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from sgl._checks import check_int
from sgl.errors import ConfigError

__all__ = ["PQIndex", "check_subvectors", "code_dtype"]


def code_dtype(bits: int) -> torch.dtype:
    """The smallest integer dtype holding a ``bits``-bit centroid id (uint8 up to 8 bits)."""
    return torch.uint8 if bits <= 8 else torch.int16 if bits <= 15 else torch.int32


def check_subvectors(num_subvectors: int, head_dim: int) -> int:
    """``num_subvectors`` as an int that divides ``head_dim`` (each sub-vector gets equal dims)."""
    m = check_int(num_subvectors, "num_subvectors", minimum=1)
    if head_dim % m:
        divisors = [k for k in range(1, head_dim + 1) if head_dim % k == 0]
        raise ConfigError(f"num_subvectors={m} does not divide the head dimension {head_dim}; "
                          f"choose one of {divisors}")
    return m


def _faiss():
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - faiss-cpu is a systems dependency
        raise ConfigError("PQCache needs faiss: pip install faiss-cpu") from exc
    return faiss


@dataclass
class PQIndex:
    """PQ codebooks and codes of the keys of several heads.

    Both live on the device of the keys they were fitted on (faiss trains on a host copy).

    Attributes:
        centroids: ``[H, m, 2^b, d/m]`` float32.
        codes: ``[H, T, m]`` centroid ids of the ``T`` coded tokens, in :func:`code_dtype` (one
            byte per id for ``b <= 8``; widened to int64 only inside :meth:`scores`).
    """

    centroids: torch.Tensor
    codes: torch.Tensor

    @classmethod
    def fit(cls, keys: torch.Tensor, num_subvectors: int = 2, bits: int = 6) -> "PQIndex":
        """Train one product quantizer per head on ``keys [H, T, d]`` and code them.

        ``bits`` is lowered to ``floor(log2 T)`` when there are fewer than ``2^bits`` keys
        (k-means needs at least one point per centroid).
        """
        if keys.dim() != 3 or keys.shape[1] < 2:
            raise ConfigError(f"PQIndex.fit needs keys [heads, tokens >= 2, dim], got {tuple(keys.shape)}")
        heads, tokens, dim = keys.shape
        m = check_subvectors(num_subvectors, dim)
        bits = min(check_int(bits, "bits", 1, 16), int(math.log2(tokens)))
        faiss = _faiss()
        data = keys.detach().to(torch.float32).cpu().numpy()
        cents, codes = [], []
        for h in range(heads):
            pq = faiss.ProductQuantizer(dim, m, bits)
            pq.verbose = False
            pq.cp.min_points_per_centroid = 1  # short prompts: no faiss warning, same k-means
            x = np.ascontiguousarray(data[h])
            pq.train(x)
            cents.append(faiss.vector_to_array(pq.centroids).reshape(m, 2 ** bits, dim // m))
            codes.append(_unpack(pq, x))
        dev = keys.device
        return cls(torch.from_numpy(np.stack(cents)).to(dev), torch.from_numpy(np.stack(codes)).to(dev, code_dtype(bits)))

    def nbytes(self) -> int:
        """Bytes of the codebooks and codes."""
        return self.centroids.numel() * self.centroids.element_size() + self.codes.numel() * self.codes.element_size()

    @property
    def num_subvectors(self) -> int:
        return self.centroids.shape[1]

    def encode(self, keys: torch.Tensor) -> torch.Tensor:
        """Nearest-centroid codes ``[H, n, m]`` of new keys ``[H, n, d]`` (no retraining)."""
        h, n, d = keys.shape
        m, dsub = self.centroids.shape[1], self.centroids.shape[3]
        sub = keys.detach().to(torch.float32).reshape(h, n, m, dsub)
        # squared distance to each centroid, per sub-space: [H, n, m, 2^b]
        dist = (sub.unsqueeze(3) - self.centroids.unsqueeze(1)).pow(2).sum(-1)
        return dist.argmin(-1)

    def append(self, keys: torch.Tensor) -> None:
        """Code ``keys [H, n, d]`` (tokens leaving the recent window) and add them to the index."""
        if keys.shape[1]:
            self.codes = torch.cat([self.codes, self.encode(keys).to(self.codes.dtype)], dim=1)

    def scores(self, queries: torch.Tensor) -> torch.Tensor:
        """Approximate ``<q, k_t>`` ``[H, G, T]`` for queries ``[H, G, d]`` (G query heads per KV head)."""
        h, g, d = queries.shape
        m, ksub, dsub = self.centroids.shape[1:]
        sub = queries.to(torch.float32).reshape(h, g, m, dsub)
        table = torch.einsum("hgmd,hmcd->hgmc", sub, self.centroids)          # [H, G, m, 2^b]
        codes = self.codes.long().permute(0, 2, 1).unsqueeze(1).expand(h, g, m, -1)  # [H, G, m, T]
        return table.gather(3, codes).sum(2)


def _unpack(pq, x: np.ndarray) -> np.ndarray:
    """faiss codes as ``[n, m]`` ids (faiss packs ``bits`` per id, so unpack via decode search)."""
    m, ksub, dsub = pq.M, pq.ksub, pq.dsub
    cents = _faiss().vector_to_array(pq.centroids).reshape(m, ksub, dsub)
    sub = x.reshape(x.shape[0], m, dsub)
    dist = ((sub[:, :, None, :] - cents[None]) ** 2).sum(-1)
    return dist.argmin(-1).astype(np.int64)
